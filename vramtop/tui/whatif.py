"""The console's questions to the headroom model, answered with a reason when they cannot be."""

from __future__ import annotations

from dataclasses import dataclass, field

from vramtop.core.budget import CONFIRM, BudgetWarning, budget_warnings, outside_budget
from vramtop.core.headroom.model import predict
from vramtop.core.headroom.terms import HeadroomError, HeadroomInputs, Prediction

STEP = 0.01


@dataclass(frozen=True)
class Machine:
    """What the dialog knows of the card beside the model: for "fits now" and the CPU case."""

    total_bytes: int | None = None
    desktop_bytes: int | None = None
    outside_budget_bytes: int | None = None
    device_kind: str | None = None  # "GPU" or "CPU", from vLLM's "… KV cache size" line


@dataclass(frozen=True)
class BudgetCheck:
    util: float | None
    prediction: Prediction | None
    reason: str | None  # why the value is refused; None when it may be used
    warnings: tuple[BudgetWarning, ...] = field(default=())  # not refusals: said, or confirmed

    @property
    def needs_confirmation(self) -> bool:
        return any(w.severity == CONFIRM for w in self.warnings)


def check_budget(
    text: str, inputs: HeadroomInputs | None, machine: Machine | None = None
) -> BudgetCheck:
    """Parse a typed budget and refuse it, with the reason, when vLLM could not start with it."""
    try:
        util = round(float(text.strip()), 2)
    except ValueError:
        return BudgetCheck(None, None, "type a number such as 0.85")
    if not 0 < util <= 1:
        return BudgetCheck(util, None, "the budget is a share of the card: above 0, at most 1")
    prediction: Prediction | None = None
    if inputs is not None:
        try:
            prediction = predict(inputs, util)
        except HeadroomError as error:
            return BudgetCheck(util, None, str(error))
    machine = machine or Machine()
    total = machine.total_bytes or (inputs.total_bytes if inputs else None)
    outside = machine.outside_budget_bytes
    if outside is None and inputs is not None and inputs.outside_budget_bytes is not None:
        outside = inputs.outside_budget_bytes
    found = budget_warnings(
        util,
        total=total,
        prediction=prediction,
        desktop=machine.desktop_bytes,
        outside_budget_bytes=outside_budget(outside),
        device_kind=machine.device_kind,
    )
    # A pool smaller than one max-model-len request is allowed: vLLM starts with it (the field
    # report ran at 0.74× for 163,840 tokens); the dialog shows the concurrency it gives.
    refused = next((w.text for w in found if w.refuse), None)
    return BudgetCheck(util, prediction, refused, tuple(w for w in found if not w.refuse))


def step(util: float, delta: float) -> float:
    return round(min(1.0, max(STEP, util + delta)), 2)
