"""At VRAMTOP_SIM_SPEED=10 the demo's samples are stamped in simulated seconds, as the
simulated vLLM's own figures are (its inter-token latencies, its stats line): the total
generation rate is what the requests running decode per simulated second. Before, it was per
real second: "generation 299 tok/s · 75/req" with 2 requests running at 4×."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.waiting import wait_until
from vramtop.core.model import Sample
from vramtop.machines.demo_backend import demo_backend
from vramtop.machines.demo_world import stop_demo_world
from vramtop.sim.serving import BASE_TPS

SPEED = 10.0


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("VRAMTOP_SIM_STARTUP_S", "0.3")
    monkeypatch.setenv("VRAMTOP_SIM_SPEED", str(SPEED))
    yield
    stop_demo_world()  # whatever the test left running (the home is the test's own)


def test_the_demos_rates_are_per_simulated_second() -> None:
    backend, _ = demo_backend(wsl=False)
    try:
        assert backend.start().ok

        def decoding() -> Sample | None:
            sample = backend.tick(log_limit=0).sample
            metrics = sample.server.metrics if sample.server else None
            running = metrics.requests_running if metrics else None
            rate = sample.rates.generation_tps
            return sample if running and rate and rate > 1 else None

        seen: list[Sample] = []

        def third() -> Sample | None:
            # The third reading while decoding: its rate is over seconds of decoding alone.
            sample = decoding()
            if sample is not None:
                seen.append(sample)
            return seen[-1] if len(seen) >= 3 else None

        sample = wait_until(third, deadline_s=60, what="the demo's agent decoding")
        assert sample.server is not None and sample.server.metrics is not None
        running = sample.server.metrics.requests_running or 1
        rate = sample.rates.generation_tps or 0.0
        # Never more than the requests running decode in a simulated second (80 tok/s each on
        # this card); per real second it read ten times that.
        assert rate <= 1.5 * BASE_TPS * running, (rate, running)
    finally:
        backend.close(stop_server=True)
