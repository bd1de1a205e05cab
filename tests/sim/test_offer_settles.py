"""The first offer is the one that holds: while a call's (or a build's) memory still grows, the
relaunch the diagnosis offers first is within 0.03 of the one it offers once the growth has
levelled off, on each simulated card (real processes, simulated time run faster)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from supervised_sim import supervised
from test_sim_contention import Agent

from tests.support.waiting import wait_until
from vramtop.core.budget import suggested_relaunch_flags
from vramtop.sim.machine import SimMachine

T = TypeVar("T")

SPEED = 8.0


def after_a_tick(backend: Any, check: Callable[[], T]) -> T:
    """`check()`, asked after one more tick of the console's backend."""
    backend.tick()
    return check()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("card", "scenario"), [("5090", "manual"), ("r9700", "r9700"), ("spark", "spark")]
)
def test_the_first_offer_is_within_003_of_the_offer_once_the_call_levels_off(
    tmp_path: Path, card: str, scenario: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    with SimMachine(
        tmp_path / "sim", scenario=scenario, speed=SPEED, startup_s=0.2, card=card
    ) as machine:
        machine.set_call(False)
        with supervised(machine, "offer", speed=SPEED) as served:
            backend = served.backend
            agent = Agent(served.profile.url)
            try:
                # A tick each simulated second until the normal rate is learned.
                wait_until(
                    lambda: after_a_tick(backend, lambda: backend.normal_rate() is not None),
                    deadline_s=60,
                    what="a normal rate learned",
                    poll_s=1 / SPEED,
                )
                machine.set_call(True)
                first = wait_until(
                    lambda: after_a_tick(
                        backend, lambda: suggested_relaunch_flags(backend.findings())
                    ),
                    deadline_s=60,
                    what="an offer during the call",
                    poll_s=1 / SPEED,
                )
                # The growth has levelled off: the call at its peak for 15 simulated seconds.
                wait_until(
                    lambda: after_a_tick(
                        backend, lambda: float(machine.state()["call_level"]) >= 1.0
                    ),
                    deadline_s=60,
                    what="the call at its peak",
                    poll_s=1 / SPEED,
                )
                settled: tuple[float, int | None] | None = None
                for _ in range(int(15 * SPEED) // 4):
                    backend.tick()
                    settled = suggested_relaunch_flags(backend.findings()) or settled
                    time.sleep(4 / SPEED)  # not a wait: a tick every 4 simulated s, for 15
                assert settled is not None, "the finding closed before the call levelled off"
                assert abs(first[0] - settled[0]) <= 0.03 + 1e-9, (first, settled)
                print(f"\n{card}: first offer {first}, once levelled off {settled}")
            finally:
                agent.close()
