"""A remedy is a set of flags: the budget, and the `--max-model-len` that still fits in it.

When the budget that leaves the desktop its room cannot hold one request of the server's
`--max-model-len`, vLLM would refuse the start (`startup_checks`); the field report's author
lowered both flags for that reason (0.93 → 0.85 and 262,144 → 163,840). So every proposal
comes with the longest round `--max-model-len` its pool holds, never a pool under one
request, and says what it gives up.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vramtop.core.headroom.calculator import estimated_max_model_len, predict
from vramtop.core.headroom.startup_checks import round_model_len
from vramtop.core.headroom.terms import HeadroomError, HeadroomInputs, Prediction
from vramtop.core.remedy import FlagChange

# A ceiling below this serves no agent's context: a budget whose pool holds less is not
# proposed (a shorter configured ceiling is kept as it is).
MIN_PROPOSED_MODEL_LEN = 8_192


@dataclass(frozen=True)
class RelaunchFlags:
    """The flags of one proposal and what vLLM makes of them."""

    budget: float
    max_model_len: int | None  # a new --max-model-len; None: the current one fits
    current_max_model_len: int
    prediction: Prediction  # at `budget`, with the new ceiling where there is one

    @property
    def change(self) -> FlagChange:
        """The relaunch these flags ask for."""
        return FlagChange(self.budget, self.max_model_len)

    def words(self) -> str:
        """`0.85 with --max-model-len 163,840 (262,144 no longer fits)`, or `0.85`."""
        if self.max_model_len is None:
            return self.change.words()
        return f"{self.change.words()} ({self.current_max_model_len:,} no longer fits)"


def relaunch_flags(inputs: HeadroomInputs, util: float) -> RelaunchFlags | None:
    """The flags that start a server at `util` (the current ceiling where it fits, else the
    longest round one the pool holds); None when no useful ceiling fits: no KV block, or less
    than MIN_PROPOSED_MODEL_LEN tokens of one request."""
    try:
        p = predict(inputs, util)
    except HeadroomError:
        return None
    current = inputs.max_model_len
    if p.fits:
        return RelaunchFlags(util, None, current, p)
    if p.kv_cache_bytes <= 0 or p.num_blocks < 1:
        return None
    shorter = round_model_len(estimated_max_model_len(inputs, p.kv_cache_bytes))
    if shorter < min(MIN_PROPOSED_MODEL_LEN, current):
        return None
    fitted = replace(inputs, max_model_len=shorter)
    return RelaunchFlags(util, shorter, current, predict(fitted, util))


def smallest_serving_util(inputs: HeadroomInputs) -> float | None:
    """The smallest two-decimal budget `relaunch_flags` finds flags for; None when none."""
    utils = [step / 100 for step in range(1, 101)]
    if relaunch_flags(inputs, 1.0) is None:
        return None
    low, high = 0, len(utils) - 1  # the pool grows with the budget: bisect
    while low < high:
        mid = (low + high) // 2
        if relaunch_flags(inputs, utils[mid]) is not None:
            high = mid
        else:
            low = mid + 1
    return utils[low]
