"""The console's questions to the headroom model, answered with a reason when they cannot be."""

from __future__ import annotations

from dataclasses import dataclass

from vramtop.core.headroom import HeadroomError, HeadroomInputs, Prediction, predict

STEP = 0.01


@dataclass(frozen=True)
class BudgetCheck:
    util: float | None
    prediction: Prediction | None
    reason: str | None  # why the value is refused; None when it may be used


def check_budget(text: str, inputs: HeadroomInputs | None) -> BudgetCheck:
    """Parse a typed budget and refuse it, with the reason, when vLLM could not start with it."""
    try:
        util = round(float(text.strip()), 2)
    except ValueError:
        return BudgetCheck(None, None, "type a number such as 0.85")
    if not 0 < util <= 1:
        return BudgetCheck(util, None, "the budget is a share of the card: above 0, at most 1")
    if inputs is None:
        return BudgetCheck(util, None, None)
    try:
        prediction = predict(inputs, util)
    except HeadroomError as error:
        return BudgetCheck(util, None, str(error))
    if prediction.kv_cache_bytes <= 0:
        return BudgetCheck(util, prediction, "too small: the weights alone do not fit in it")
    # A pool smaller than one max-model-len request is allowed: vLLM starts with it (the field
    # report ran at 0.74× for 163,840 tokens); the dialog shows the concurrency it gives.
    if prediction.desktop_headroom_bytes < 0:
        return BudgetCheck(util, prediction, "too large: it leaves the desktop nothing")
    return BudgetCheck(util, prediction, None)


def step(util: float, delta: float) -> float:
    return round(min(1.0, max(STEP, util + delta)), 2)
