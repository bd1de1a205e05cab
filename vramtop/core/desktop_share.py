"""The desktop's share as it was seen (its peak, trend and unseen part) and the budget that
leaves it what it needs: the suggestion every relaunch offer starts from. The budget
arithmetic itself is `vramtop.core.budget`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vramtop.core.budget import (
    BUDGET_NUDGE,
    GIB,
    MIB,
    START_MARGIN_BYTES,
    desktop_headroom_bytes,
    largest_util_for_desktop,
)

# While the desktop's share still grows, the suggestion allows for what a video call takes of
# the card (the field report: ~2.5-3 GiB within seconds) above where the desktop stood when the
# server started, not an extrapolation of the ramp: a call that takes its memory in 4 s would
# extrapolate to tens of GiB, and the first offer must be the one that holds once it levels off.
CALL_DEMAND_BYTES = 3 * GIB
# A share that has grown past a call's demand is not a call (a build, a game): it is allowed
# its trend for this much longer, the time such a ramp was seen to take to level off once it
# fills the card (a minute-long ramp squeezes the server in its last ten seconds or so).
GROWTH_HORIZON_S = 10.0
# Below this the desktop is not growing (a compositor's wobble).
GROWING_BYTES_PER_S = 4 * MIB


# The desktop's trend is read over this much of its recent history, and it has levelled off
# when its last LEVELLED_S seconds held still.
TREND_WINDOW_S = 15.0
LEVELLED_S = 5.0


def growth_rate(history: Sequence[tuple[float, int]]) -> float:
    """Bytes a second the desktop's share grew by over `history` ((t, bytes), oldest first):
    the least-squares slope, 0.0 when it shrank, held still or is too short to tell. A share
    that jumped and has held still for the last `LEVELLED_S` has levelled off (a video call
    takes its memory in a few seconds): the slope of those seconds bounds the whole one."""
    whole = _slope(history)
    end = history[-1][0] if history else 0.0
    recent = [(t, b) for t, b in history if t >= end - LEVELLED_S]
    return min(whole, _slope(recent)) if _long_enough(recent) else whole


def _long_enough(history: Sequence[tuple[float, int]]) -> bool:
    return len(history) >= 3 and history[-1][0] - history[0][0] >= 2.0


def _slope(history: Sequence[tuple[float, int]]) -> float:
    if not _long_enough(history):
        return 0.0
    n = len(history)
    mean_t = sum(t for t, _ in history) / n
    mean_b = sum(b for _, b in history) / n
    var = sum((t - mean_t) ** 2 for t, _ in history)
    if var <= 0:
        return 0.0
    slope = sum((t - mean_t) * (b - mean_b) for t, b in history) / var
    return max(0.0, slope)


@dataclass(frozen=True)
class DesktopDemand:
    """What the desktop needs beside the server, as far as it was seen."""

    peak: int  # the largest share seen since the server started
    now: int | None = None
    growth_bytes_per_s: float = 0.0  # the share's recent trend (≥ 0)
    unseen: int = 0  # demand the desktop could not show (it never got past what it was left)
    at_start: int | None = None  # the share when the server started

    @property
    def growing(self) -> bool:
        return self.growth_bytes_per_s >= GROWING_BYTES_PER_S

    @property
    def expected_growth(self) -> int:
        """How much more than its peak the share is expected to take while it still grows: up
        to a call's demand above where it started; once past that (not a call), its trend for
        GROWTH_HORIZON_S more. Never the ramp extrapolated far."""
        if not self.growing:
            return 0
        trend = round(self.growth_bytes_per_s * GROWTH_HORIZON_S)
        if self.at_start is None:
            return min(trend, CALL_DEMAND_BYTES)
        grown = self.peak - self.at_start
        if grown > CALL_DEMAND_BYTES:
            return trend
        return max(0, CALL_DEMAND_BYTES - grown)

    @property
    def expected_peak(self) -> int:
        """The share to leave room for: the peak seen, plus the part not seen (a share capped
        by what the server left it) or the growth still to come, whichever is larger (both
        estimate the same demand)."""
        return self.peak + max(self.unseen, self.expected_growth)


@dataclass(frozen=True)
class Suggestion:
    """The budget to relaunch at so that the desktop keeps what it needs."""

    budget: float
    desktop_need_bytes: int  # peak (plus its expected growth and unseen part) plus the margin
    desktop_headroom_bytes: int  # what `budget` leaves the desktop
    leaves_desktop_need: bool  # False: no budget that still serves leaves it that much
    growing: bool  # the desktop's share was still growing
    unseen_bytes: int  # what was allowed for demand the desktop could not show


def suggested_budget(
    total: int,
    demand: DesktopDemand,
    margin: int,
    *,
    outside_budget_bytes: int,
    util_now: float | None = None,
    smallest_serving: float | None = None,
) -> Suggestion:
    """The largest budget that leaves the desktop its peak (plus the growth still to come, and
    `margin`), below the current one, and never one that does not fit the memory free now.

    `smallest_serving`: the smallest budget that still serves (`flags.smallest_serving_util`);
    when the desktop's need leaves less, that one is suggested (and `leaves_desktop_need` is
    False).
    """
    need = demand.expected_peak + margin
    if demand.now is not None:
        need = max(need, demand.now + START_MARGIN_BYTES)
    util = largest_util_for_desktop(total, need, outside_budget_bytes)
    if util_now is not None:
        util = min(util, round(util_now - BUDGET_NUDGE, 2))
    leaves = True
    if smallest_serving is not None and util < smallest_serving:
        util, leaves = smallest_serving, False
    return Suggestion(
        budget=util,
        desktop_need_bytes=need,
        desktop_headroom_bytes=desktop_headroom_bytes(total, util, outside_budget_bytes),
        leaves_desktop_need=leaves,
        growing=demand.growing,
        unseen_bytes=demand.unseen,
    )
