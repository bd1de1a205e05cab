"""The one rule for a suggested budget (`relaunch.suggest_budget`): what each caller's inputs
add to it, and that a caller without a squeeze gets no cap and no unseen demand."""

import math

from vramtop.core.budget import GIB, START_MARGIN_BYTES
from vramtop.core.diagnosis.suggested_budget import suggest_budget
from vramtop.core.diagnosis.thresholds import DESKTOP_MARGIN_BYTES, UNSEEN_DESKTOP_DEMAND_BYTES

TOTAL = 24 * GIB
OUTSIDE = GIB // 2


def leaves(util: float) -> int:
    return TOTAL - math.ceil(TOTAL * util) - OUTSIDE


def test_the_peak_alone_gives_the_largest_budget_leaving_it_and_the_margin() -> None:
    peak = int(4.3 * GIB)
    s = suggest_budget(TOTAL, peak, outside_budget_bytes=OUTSIDE)
    assert leaves(s.budget) >= peak + DESKTOP_MARGIN_BYTES
    assert leaves(round(s.budget + 0.01, 2)) < peak + DESKTOP_MARGIN_BYTES
    assert s.leaves_desktop_need and s.unseen_bytes == 0


def test_the_desktop_now_above_its_peak_keeps_the_budget_within_the_memory_free_now() -> None:
    peak, now = 2 * GIB, 5 * GIB
    s = suggest_budget(TOTAL, peak, outside_budget_bytes=OUTSIDE, now=now)
    assert leaves(s.budget) >= now + START_MARGIN_BYTES
    assert s.budget < suggest_budget(TOTAL, peak, outside_budget_bytes=OUTSIDE).budget


def test_never_below_the_smallest_budget_that_serves() -> None:
    s = suggest_budget(TOTAL, 20 * GIB, outside_budget_bytes=OUTSIDE, smallest_serving=0.4)
    assert s.budget == 0.4 and not s.leaves_desktop_need


def test_a_squeeze_caps_below_its_budget_and_allows_for_the_demand_it_hid() -> None:
    peak = 2 * GIB  # within what 0.85 leaves the desktop: its real demand was not seen
    free = suggest_budget(TOTAL, peak, outside_budget_bytes=OUTSIDE)
    squeezed = suggest_budget(TOTAL, peak, outside_budget_bytes=OUTSIDE, squeezed_at=0.85)
    assert squeezed.budget <= 0.84 < free.budget
    assert squeezed.unseen_bytes == UNSEEN_DESKTOP_DEMAND_BYTES
    assert leaves(squeezed.budget) >= peak + UNSEEN_DESKTOP_DEMAND_BYTES + DESKTOP_MARGIN_BYTES
