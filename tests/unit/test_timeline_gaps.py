"""Rates from samples taken further apart than the rate window (`--interval 5`,
`interval_s = 10` in config.toml): the rate over the one gap, not none."""

from __future__ import annotations

import pytest

from vramtop.core.counter_window import CounterWindow
from vramtop.core.model import GpuReading, Sample, ServerMetrics, ServerReading


def _sample(t: float, tokens: float) -> Sample:
    server = ServerReading(
        url="http://x", reachable=True, metrics=ServerMetrics(generation_tokens_total=tokens)
    )
    return Sample(t=t, gpu=GpuReading(), server=server)


def test_samples_the_window_apart_or_more_give_the_rate_over_their_gap() -> None:
    for gap in (5.0, 5.03, 10.0, 60.0):
        timeline = CounterWindow(window_s=5.0)
        timeline.add(_sample(100.0, 0.0))
        stored = timeline.add(_sample(100.0 + gap, 50.0 * gap))
        assert stored.rates.generation_tps == pytest.approx(50.0), gap


def test_a_steady_interval_past_the_window_gives_a_rate_at_every_sample() -> None:
    timeline = CounterWindow(window_s=5.0)
    rates = [timeline.add(_sample(10.0 * i, 40.0 * 10 * i)).rates.generation_tps for i in range(6)]
    assert rates[0] is None and rates[1:] == [40.0] * 5
    assert len(timeline) <= 2  # one sample before the window is all that is kept for it
    # Once samples fall within the window again, the one kept from before it is not used.
    timeline.add(_sample(51.0, 2_020.0))
    assert timeline.add(_sample(52.0, 2_040.0)).rates.generation_tps == pytest.approx(20.0)
