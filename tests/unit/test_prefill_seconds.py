"""Seconds in which requests run but none generates, a moment after tokens were generated
(a request reading its prompt between decodes: vLLM counts a prompt's tokens once it is
read), measure no decode speed: the per-request rate is never 0/req beside the generation
the screen gives for the same seconds (seen on the Spark demo: "generation 8 tok/s  0/req ·
normal 28", the door line "0/req"). Nothing generated for longer is a stall: 0."""

from __future__ import annotations

import itertools

from vramtop.core.diagnosis.meter import RateMeter
from vramtop.core.diagnosis.throughput import SMOOTH_S
from vramtop.core.model import GpuReading, Sample, ServerMetrics, ServerReading, ServerState


def at(t: float, generated: float, prompts: float, running: float = 1.0) -> Sample:
    metrics = ServerMetrics(
        generation_tokens_total=generated,
        prompt_tokens_total=prompts,
        requests_running=running,
    )
    server = ServerReading(url="http://127.0.0.1:8000", reachable=True, metrics=metrics)
    return Sample(t=t, gpu=GpuReading(source="sim"), server=server)


def measured(samples: list[Sample]) -> list[float | None]:
    """Each interval's per-request rate as the meter judges it (None: not measured)."""
    meter = RateMeter()
    rates = []
    for prev, s in itertools.pairwise(samples):
        point = meter.measure(prev, s, ServerState.RUNNING)
        rates.append(point.per_request_tps if point is not None else None)
    return rates


def test_a_request_reading_its_prompt_between_decodes_measures_nothing() -> None:
    # 16 tok/s for a second, then a new request reads its prompt: neither counter moves
    # (its prompt is counted once read, at once: 3,800 tokens).
    samples = [at(10.0, 500.0, 1000.0), at(11.0, 516.0, 1000.0)]
    samples += [at(12.0, 516.0, 1000.0), at(13.0, 516.0, 1000.0), at(14.0, 516.0, 4800.0)]
    samples.append(at(15.0, 532.0, 4800.0))
    assert measured(samples) == [16.0, None, None, None, 16.0]


def test_requests_that_generate_nothing_for_longer_are_a_stall_measured_zero() -> None:
    samples = [at(10.0, 500.0, 1000.0), at(11.0, 516.0, 1000.0)]
    samples += [at(11.0 + k, 516.0, 1000.0 + 12 * k) for k in range(1, 9)]
    rates = measured(samples)
    quiet = [11.0 + k for k in range(1, 9)]
    # Not measured while tokens were generated within the screen's window; 0 after it.
    assert rates[1:] == [None if t - 11.0 < SMOOTH_S else 0.0 for t in quiet]
    assert rates[-1] == 0.0
