"""The first relaunch the diagnosis offers during a call is within 0.03 of the one once it has
levelled off, on each simulated card. The world, the simulated vLLM (its engine, scheduler and
HTTP API) and the console's sampler and diagnosis run in the test's process on a clock the
test moves (tests/support/sim_card.py): the call's minutes take a second, and the samples'
rates are per simulated second whatever the machine's load."""

from __future__ import annotations

import pytest

from tests.support.sim_card import SimCard
from vramtop.core.budget import suggested_relaunch_flags
from vramtop.machines.machine_backend import MachineBackend

SPEED = 8.0  # the scheduler steps as the simulator's processes do at 8 times real time
LIMIT_S = 480.0  # simulated seconds a stage may take (60 real seconds at SPEED)


@pytest.mark.parametrize(
    ("card", "scenario"), [("5090", "manual"), ("r9700", "r9700"), ("spark", "spark")]
)
def test_the_first_offer_is_within_003_of_the_offer_once_the_call_levels_off(
    card: str, scenario: str
) -> None:
    sim = SimCard(scenario, speed=SPEED, card=card)
    sim.set_call(False)
    served = sim.server(sim.machine.card.budget)
    with served.watched() as backend:
        served.start_request()  # the agent's long answer

        def ticked(seconds: float = 1.0) -> MachineBackend:
            """The console's tick after `seconds` of simulated time."""
            served.run(seconds)
            backend.tick()
            return backend

        served.run_until(lambda: ticked().session.normal_rate() is not None, LIMIT_S)
        assert backend.session.normal_rate() is not None, "no normal rate was learned"
        sim.set_call(True)
        first: tuple[float, int | None] | None = None

        def offered() -> bool:
            nonlocal first
            first = suggested_relaunch_flags(ticked().session.findings())
            return first is not None

        served.run_until(offered, LIMIT_S)
        assert first is not None, "nothing was offered during the call"
        # The growth has levelled off: the call at its peak, then a tick every 4 simulated
        # seconds for 120 (15 real seconds at SPEED, as the test on real processes waited).
        served.run_until(lambda: ticked() and float(sim.state()["call_level"]) >= 1.0, LIMIT_S)
        settled: tuple[float, int | None] | None = None
        for _ in range(int(15 * SPEED) // 4):
            settled = suggested_relaunch_flags(ticked(4.0).session.findings()) or settled
        assert settled is not None, "the finding closed before the call levelled off"
        assert abs(first[0] - settled[0]) <= 0.03 + 1e-9, (first, settled)
        print(f"\n{card}: first offer {first}, once levelled off {settled}")
