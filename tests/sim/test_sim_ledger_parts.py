"""The ledger's parts on their own: the desktop's demand over time (`DesktopLoad`) and the
contention model (`contention`). Pure: simulated time, no processes."""

from __future__ import annotations

import pytest

from vramtop.sim import scenario as scenarios
from vramtop.sim.card import GIB
from vramtop.sim.contention import (
    COLLAPSED_FACTOR,
    Allocation,
    mark_onsets,
    memory_factor,
    spill,
)
from vramtop.sim.desktop_load import DesktopLoad


def test_a_call_asked_for_ramps_the_desktop_up_then_down_at_the_scenarios_pace() -> None:
    desktop = DesktopLoad(scenarios.load("manual"))
    idle = sum(b for _, _, b in desktop.demand(0.0))
    desktop.set_call(True)
    up = desktop.scenario.call_ramp_up_s
    desktop.ramp(up / 2, up / 2)
    assert desktop.call_on(up / 2) and desktop.call_level == pytest.approx(0.5)
    desktop.ramp(up * 2, up * 1.5)
    assert desktop.call_level == 1.0
    assert sum(b for _, _, b in desktop.demand(up * 2)) > idle
    desktop.set_call(False)
    desktop.ramp(up * 2 + 1e6, 1e6)
    assert desktop.call_level == 0.0


def test_a_spill_is_shared_by_what_each_holds_and_slows_the_one_that_spilled() -> None:
    big, small = Allocation(1, "big", 9 * GIB), Allocation(2, "small", 3 * GIB)
    spill([big, small], 2 * GIB)
    assert big.spilled == pytest.approx(1.5 * GIB, rel=1e-6)
    assert small.spilled == pytest.approx(0.5 * GIB, rel=1e-6)
    spill([big, small], -GIB)  # the desktop shrank: nothing comes back
    assert big.spilled == pytest.approx(1.5 * GIB, rel=1e-6)
    plenty = 4 * GIB
    assert memory_factor(0, plenty) == 1.0
    assert memory_factor(big.spilled, plenty) < COLLAPSED_FACTOR
    mark_onsets([big, small], plenty, since=12.0)
    assert (big.slowed_at, big.collapsed_at) == (12.0, 12.0)
