"""The console's questions to the headroom model, answered with a reason when they cannot be."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from vramtop.core.bounds import (
    budget_problem,
    kv_cache_dtype_problem,
    parse_model_len,
    plain_number,
)
from vramtop.core.budget import (
    BUDGET_NUDGE,
    CONFIRM,
    BudgetWarning,
    budget_warnings,
    is_cpu_server,
    outside_budget,
)
from vramtop.core.headroom.calculator import predict
from vramtop.core.headroom.flags import MIN_PROPOSED_MODEL_LEN, RelaunchFlags, relaunch_flags
from vramtop.core.headroom.terms import HeadroomError, HeadroomInputs, Prediction, dtype_bytes
from vramtop.core.remedy import FlagChange


@dataclass(frozen=True)
class Machine:
    """What the dialog knows of the card beside the model: for "fits now" and the CPU case."""

    total_bytes: int | None = None
    desktop_bytes: int | None = None
    outside_budget_bytes: int | None = None
    device_kind: str | None = None  # "GPU" or "CPU", from vLLM's "… KV cache size" line


@dataclass(frozen=True)
class RelaunchChoice:
    """What the relaunch dialog hands back: the flags to relaunch with, and whether the
    person confirmed them against the memory free now."""

    change: FlagChange
    # Confirmed although it does not fit now: the person knows better (a desktop program about
    # to close), so vLLM's checks against the memory free now do not stop it.
    forced: bool = False


@dataclass(frozen=True)
class BudgetCheck:
    budget: float | None
    prediction: Prediction | None
    reason: str | None  # why the value is refused; None when it may be used
    warnings: tuple[BudgetWarning, ...] = field(default=())  # not refusals: said, or confirmed
    # The flags a relaunch at `util` needs (a shorter --max-model-len where the current one no
    # longer fits); None where the model is not known.
    flags: RelaunchFlags | None = None

    @property
    def max_model_len(self) -> int | None:
        """The --max-model-len to relaunch with; None: keep the current one."""
        return self.flags.max_model_len if self.flags is not None else None

    def change(self, kept: FlagChange | None = None) -> FlagChange:
        """The flags to relaunch with: this budget, with the --max-model-len it needs, else the
        one `kept` (a what-if's proposal) names, and `kept`'s KV dtype."""
        kept = kept or FlagChange()
        length = self.max_model_len if self.max_model_len is not None else kept.max_model_len
        return FlagChange(self.budget, length, kept.kv_cache_dtype)

    @property
    def needs_confirmation(self) -> bool:
        return any(w.severity == CONFIRM for w in self.warnings)


def check_budget(
    text: str, inputs: HeadroomInputs | None, machine: Machine | None = None
) -> BudgetCheck:
    """Parse a typed budget and refuse it, with the reason, when vLLM could not start with it."""
    # (A typed number is a few characters: 100,000 digits cost float() its time.)
    value = plain_number(text) if len(text) <= 32 else None
    if value is None:  # nan, inf, 1e400, 1_0: no budget at all
        return BudgetCheck(None, None, "type a number such as 0.85")
    util = round(value, 2)
    problem = budget_problem(util)
    if problem is not None and budget_problem(value) is None:  # 0.004: above 0, shown 0.00
        problem = f"the budget is set in hundredths: {text.strip()} is below 0.01"
    if problem is not None:
        # The value is kept for +/- to step from (clamped), but no figure is shown for it.
        return BudgetCheck(util, None, problem)
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
    refused = next((w.text for w in found if w.refuse), None)
    # On a CPU server the budget does not size the pool (VLLM_CPU_KVCACHE_SPACE does): no
    # ceiling follows from it.
    cpu = is_cpu_server(machine.device_kind)
    flags = relaunch_flags(inputs, util) if inputs is not None and not cpu else None
    if refused is None and prediction is not None and flags is None and not cpu:
        # vLLM refuses a pool that cannot hold one request of --max-model-len; a shorter one
        # would be proposed, but not even a useful one fits.
        refused = (
            f"too small: its KV pool holds less than one {MIN_PROPOSED_MODEL_LEN:,}-token "
            "request, vLLM would not start"
        )
    if flags is not None:
        prediction = flags.prediction
    return BudgetCheck(util, prediction, refused, tuple(w for w in found if not w.refuse), flags)


def nudged(util: float, delta: float) -> float:
    """`util` moved by `delta`, within [BUDGET_NUDGE, 1]."""
    return round(min(1.0, max(BUDGET_NUDGE, util + delta)), 2)


@dataclass(frozen=True)
class WhatIfFields:
    """The what-if's typed fields, read: the inputs they make, or why they cannot be used."""

    inputs: HeadroomInputs
    problem: str | None = None  # a field that is not usable, in words; the inputs are the base's


def what_if_inputs(base: HeadroomInputs, max_model_len: str, kv_dtype: str) -> WhatIfFields:
    """`base` with the typed --max-model-len and KV dtype; a field that vLLM would not take
    (0, -5, 10**20, fp9) leaves `base` and says what is wrong, never raises."""
    inputs = base
    if max_model_len.strip():
        length, problem = parse_model_len(max_model_len)
        if length is None:
            return WhatIfFields(base, f"max-model-len {problem}")
        inputs = replace(inputs, max_model_len=length)
    dtype = kv_dtype.strip()
    if dtype:
        problem = kv_cache_dtype_problem(dtype)
        if problem is None and dtype != "auto":
            try:
                dtype_bytes(dtype)
            except HeadroomError as error:
                problem = str(error)
        if problem is not None:
            return WhatIfFields(base, f"KV dtype {problem}")
        inputs = replace(inputs, kv_cache_dtype=dtype)
    return WhatIfFields(inputs)
