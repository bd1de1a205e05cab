"""At VRAMTOP_SIM_SPEED=10 the demo's samples are stamped in simulated seconds, as the
simulated vLLM's own figures are (its inter-token latencies, its stats line), so that its rates
are per simulated second. Before, they were per real second: "generation 299 tok/s · 75/req"
with 2 requests running at 4×. The stamps are held to the simulated GPU's own clock by the
order of the reads, not by a rate measured in real time (which a busy machine moves)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.waiting import wait_until
from vramtop.machines.demo_backend import demo_backend
from vramtop.machines.demo_world import demo_machine, stop_demo_world

SPEED = 10.0


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("VRAMTOP_SIM_STARTUP_S", "0.3")
    monkeypatch.setenv("VRAMTOP_SIM_SPEED", str(SPEED))
    yield
    stop_demo_world()  # whatever the test left running (the home is the test's own)


def test_the_demos_samples_are_stamped_in_simulated_seconds() -> None:
    backend, _ = demo_backend(wsl=False, agent=False)
    world = demo_machine().client

    def world_t() -> float:
        # The simulated GPU's time as it answers (its clock, real time x SPEED, is read then).
        t = world.request("ping")["t"]
        assert isinstance(t, float)
        return t

    try:
        before_a = world_t()
        a = backend.tick(log_limit=0).sample
        after_a = world_t()
        # 20 simulated seconds: 2 real ones.
        wait_until(lambda: world_t() >= after_a + 20, deadline_s=60, what="20 simulated s")
        before_b = world_t()
        b = backend.tick(log_limit=0).sample
        after_b = world_t()
        # Each sample is stamped between the reads around it, on the same pace: however long
        # each step took, the samples are as far apart as the simulated GPU's clock says
        # (in real seconds they would be a tenth of it).
        assert before_b - after_a <= b.t - a.t <= after_b - before_a, (
            (before_a, after_a, before_b, after_b),
            (a.t, b.t),
        )
    finally:
        backend.close(stop_server=True)
