"""Budget arithmetic: what one `--gpu-memory-utilization` means, and every warning about it.

One place for the rules every surface (the banner's remedy, the relaunch dialog, the what-if,
`calc`, the supervisor's start-failed message, the diagnosis) prints:

    budget           = ceil(total × util)                     (vLLM's own rounding)
    desktop headroom = total − budget − what the server holds outside its budget
    free to a server = total − the desktop's share − outside  (vLLM checks free ≥ budget)

A budget is typed with two decimals, so "the largest budget that …" is always the largest
two-decimal value whose rounded-up budget stays within the room. What the pool gets inside a
budget (KV GiB, tokens, blocks, concurrency) is `vramtop.core.headroom.predict`; the warnings
here read its `Prediction`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vramtop.core.remedy import KvCost

if TYPE_CHECKING:
    from vramtop.core.findings import Finding
    from vramtop.core.headroom.terms import Prediction

GIB = 1024**3
MIB = 1024**2

# Memory a vLLM server holds outside its budget (the CUDA context and what the process took
# before vLLM's baseline snapshot): 0.5-1.3 GB in the field. The low end, so that the desktop
# share derived from it is never overstated; a measured value replaces it where there is one.
OUTSIDE_BUDGET_ESTIMATE_BYTES = GIB // 2
# vLLM prints GiB figures with two decimals ("(22.08/24.00 GiB)"): ± this much.
LOG_ROUNDING_BYTES = round(0.005 * GIB)
# What a proposed budget leaves unused of the memory free now: the desktop moves while vLLM
# loads (a browser tab, a compositor buffer), and vLLM checks the free memory only after that.
START_MARGIN_BYTES = 256 * MIB
# A budget is never proposed above this: the desktop always keeps something.
MAX_PROPOSED_UTIL = 0.99
# The least a budget moves: a +/- in the dialogs, the guard's own moves.
BUDGET_NUDGE = 0.01


def budget_bytes(total: int, util: float) -> int:
    """vLLM's requested memory: ceil(total × util)."""
    return math.ceil(total * util)


def outside_budget(measured: int | None) -> int:
    """What the server holds beyond its budget: measured where known, else the estimate."""
    return OUTSIDE_BUDGET_ESTIMATE_BYTES if measured is None else max(0, measured)


def desktop_headroom_bytes(total: int, util: float, outside_budget_bytes: int = 0) -> int:
    """What the card keeps for everything else: total − budget − the server outside its budget."""
    return total - budget_bytes(total, util) - outside_budget_bytes


def free_for_server(total: int, desktop: int, outside_budget_bytes: int) -> int:
    """What a server started now would find free at vLLM's check: the card less the desktop's
    share and what the new process takes before it (its CUDA context)."""
    return total - desktop - outside_budget_bytes


def largest_util_within(total: int, room: int) -> float:
    """The largest two-decimal util (at most 1) whose budget fits in `room` bytes; 0.0 when
    none does."""
    if total <= 0 or room <= 0:
        return 0.0
    util = min(1.0, math.floor(room / total * 100 + 1e-9) / 100)
    while util > 0 and budget_bytes(total, util) > room:
        util = round(util - BUDGET_NUDGE, 2)
    return max(util, 0.0)


def largest_util_leaving(total: int, headroom: int, outside_budget_bytes: int = 0) -> float:
    """The largest two-decimal util whose budget leaves `headroom` bytes to the desktop beside
    a server that also holds `outside_budget_bytes`; 0.0 when no budget does."""
    return largest_util_within(total, total - outside_budget_bytes - headroom)


def largest_util_for_desktop(total: int, desktop_need: int, outside_budget_bytes: int) -> float:
    """The largest budget worth proposing (at most 0.99) that leaves `desktop_need` bytes to the
    desktop; 0.0 when none does."""
    return min(MAX_PROPOSED_UTIL, largest_util_leaving(total, desktop_need, outside_budget_bytes))


def largest_util_that_fits(free: int, total: int, margin: int = START_MARGIN_BYTES) -> float:
    """The largest two-decimal util whose budget fits the memory free now, less a margin."""
    return min(MAX_PROPOSED_UTIL, largest_util_within(total, free - margin))


def largest_util_that_fits_logged(free_gib: float, total_gib: float) -> float:
    """The same, from vLLM's start-failed line ("Free memory on device (22.08/24.00 GiB)"):
    its figures are rounded, so the free memory may be up to half a hundredth lower."""
    total = round(total_gib * GIB)
    return largest_util_that_fits(round(free_gib * GIB) - LOG_ROUNDING_BYTES, total)


@dataclass(frozen=True)
class Fit:
    """Whether a budget fits the memory a server started now would find free, by vLLM's own
    check (requested ≤ free)."""

    fits: bool
    needs_bytes: int  # the budget
    free_bytes: int  # free to a new server now (the current server's memory counted free)

    @property
    def spare_bytes(self) -> int:
        return self.free_bytes - self.needs_bytes

    @property
    def tight(self) -> bool:
        """It fits, with less to spare than the desktop moves by while vLLM loads."""
        return self.fits and self.spare_bytes < START_MARGIN_BYTES

    def text(self) -> str:
        """`fits now: yes (needs 27.38 GiB; vLLM would find 27.90 GiB free)`, or with a margin
        said as what it is: `fits now: yes, 0.12 GiB to spare: a growing call can take that
        (…)`."""
        # What vLLM would find free: the card less the desktop and its own CUDA context (the
        # running server's memory counts as free, it is stopped first), not the card's free.
        figures = (
            f"(needs {self.needs_bytes / GIB:.2f} GiB; vLLM would find "
            f"{max(0, self.free_bytes) / GIB:.2f} GiB free)"
        )
        if not self.fits:
            return f"fits now: no {figures}"
        if self.tight:
            return (
                f"fits now: yes, {self.spare_bytes / GIB:.2f} GiB to spare: a growing call can "
                f"take that {figures}"
            )
        return f"fits now: yes {figures}"


def fit_now(total: int, util: float, desktop: int, outside_budget_bytes: int) -> Fit:
    """Whether vLLM would start at `util` if relaunched now: its budget within the memory free
    to it (vLLM's own check)."""
    free = free_for_server(total, desktop, outside_budget_bytes)
    need = budget_bytes(total, util)
    return Fit(need <= free, need, free)


# --- warnings ------------------------------------------------------------------------------

NO_KV_BLOCK = "no_kv_block"
LEAVES_DESKTOP_NOTHING = "leaves_desktop_nothing"
DOES_NOT_FIT_NOW = "does_not_fit_now"
NO_EFFECT_ON_CPU = "no_effect_on_cpu"

CPU_POOL_WORDS = (
    "on a CPU server the budget does not size the KV pool: VLLM_CPU_KVCACHE_SPACE (GiB) does"
)


REFUSE = "refuse"  # vLLM cannot work with it at all
CONFIRM = "confirm"  # it would fail now: only on a second confirmation
NOTE = "note"  # it works, but does not do what a budget usually does


@dataclass(frozen=True)
class BudgetWarning:
    kind: str  # one of the constants above
    text: str  # in the user's words
    severity: str  # REFUSE, CONFIRM or NOTE

    @property
    def refuse(self) -> bool:
        return self.severity == REFUSE


def leaves_no_kv_block(prediction: Prediction) -> bool:
    """The budget leaves no room for a single KV block: vLLM refuses to start with it."""
    return prediction.kv_cache_bytes <= 0 or prediction.num_blocks < 1


def shortfall_words(prediction: Prediction) -> str:
    """How far a budget falls short of holding what vLLM puts in it before its KV pool:
    "17.96 GiB short of the weights and vLLM's other memory (no KV pool)"."""
    return (
        f"{prediction.kv_shortfall_bytes / GIB:.2f} GiB short of the weights and vLLM's other "
        "memory (no KV pool)"
    )


def is_cpu_server(device_kind: str | None) -> bool:
    """vLLM's "CPU KV cache size" line: the CPU build, whose pool the budget does not set."""
    return device_kind is not None and device_kind.upper() == "CPU"


def budget_warnings(
    util: float,
    *,
    total: int | None = None,
    prediction: Prediction | None = None,
    desktop: int | None = None,
    outside_budget_bytes: int = OUTSIDE_BUDGET_ESTIMATE_BYTES,
    device_kind: str | None = None,
) -> list[BudgetWarning]:
    """Every warning about relaunching at `util`, most serious first. What is not known is not
    checked (no prediction: no KV check; no desktop share: no fit check)."""
    if is_cpu_server(device_kind):
        return [BudgetWarning(NO_EFFECT_ON_CPU, CPU_POOL_WORDS, NOTE)]
    warnings: list[BudgetWarning] = []
    if prediction is not None and leaves_no_kv_block(prediction):
        what = (
            f"it is {shortfall_words(prediction)}"
            if prediction.kv_shortfall_bytes > 0
            else "it leaves no KV block"
        )
        warnings.append(
            BudgetWarning(NO_KV_BLOCK, f"too small: {what}, vLLM would not start", REFUSE)
        )
    if total is not None and desktop_headroom_bytes(total, util, outside_budget_bytes) < 0:
        warnings.append(
            BudgetWarning(
                LEAVES_DESKTOP_NOTHING, "too large: it leaves the desktop nothing", REFUSE
            )
        )
    if total is not None and desktop is not None:
        fit = fit_now(total, util, desktop, outside_budget_bytes)
        if not fit.fits:
            warnings.append(
                BudgetWarning(
                    DOES_NOT_FIT_NOW,
                    f"does not fit now: it needs {fit.needs_bytes / GIB:.2f} GiB and "
                    f"{max(0, fit.free_bytes) / GIB:.2f} GiB would be free; vLLM would stop "
                    "with an out-of-memory error",
                    CONFIRM,
                )
            )
    return warnings


# --- what a change costs the pool --------------------------------------------------------------


def kv_cost(
    total: int, util_now: float | None, util_new: float, kv_pool: int | None, kv_tokens: int | None
) -> KvCost | None:
    """What another budget does to the KV pool: it changes by the budget difference (None:
    the current budget is not known)."""
    if util_now is None:
        return None
    shrink = budget_bytes(total, util_now) - budget_bytes(total, util_new)
    if not kv_pool:
        return KvCost(-shrink)
    after = max(0, kv_pool - shrink)
    loss = round(shrink / kv_pool, 3)
    if not kv_tokens:
        return KvCost(-shrink, kv_pool, after, loss)
    return KvCost(-shrink, kv_pool, after, loss, kv_tokens, kv_tokens * after // kv_pool)


def kv_change(now: Prediction, new: Prediction) -> KvCost:
    """The same figures as `kv_cost`, from two predictions of one calibrated model (what the
    dialog and the what-if print)."""
    pool, after = now.kv_cache_bytes, max(0, new.kv_cache_bytes)
    change = new.budget_bytes - now.budget_bytes
    if pool <= 0:
        return KvCost(change)
    loss = round((pool - after) / pool, 3)
    return KvCost(change, pool, after, loss, now.kv_cache_tokens, new.kv_cache_tokens)


def change_words(base: Prediction, new: Prediction) -> str:
    """What going from `base` to `new` does, in words that say which way it goes:
    "frees 1.27 GiB for the desktop, costs 16,640 KV tokens against 0.93"."""
    freed = new.desktop_headroom_bytes - base.desktop_headroom_bytes
    tokens = new.kv_cache_tokens - base.kv_cache_tokens
    if freed == 0 and tokens == 0:
        return f"the same as {base.budget:.2f}"
    desktop = (
        f"frees {freed / GIB:.2f} GiB for the desktop"
        if freed >= 0
        else f"takes {-freed / GIB:.2f} GiB from the desktop"
    )
    kv = f"costs {-tokens:,} KV tokens" if tokens < 0 else f"gains {tokens:,} KV tokens"
    return f"{desktop}, {kv} against {base.budget:.2f}"


# --- the suggested budget --------------------------------------------------------------------


def suggested_relaunch_budget(findings: Iterable[Finding]) -> float | None:
    """The budget the open findings suggest relaunching at (the first that names one), as the
    banner's `b`, the relaunch dialog and the what-if offer it; None when none does."""
    flags = suggested_relaunch_flags(findings)
    return flags[0] if flags is not None else None


def suggested_relaunch_flags(findings: Iterable[Finding]) -> tuple[float, int | None] | None:
    """The flags the open findings suggest relaunching with (the first that names a budget):
    the budget, and the --max-model-len it needs where the current one no longer fits (None:
    keep it); None when no finding suggests a budget."""
    for finding in findings:
        if finding.remedy.budget is not None:
            return finding.remedy.budget, finding.remedy.max_model_len
    return None
