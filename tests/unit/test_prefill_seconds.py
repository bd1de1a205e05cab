"""A second in which the running requests only read prompts measures no decode speed: the
per-request rate is never 0 beside the tokens the seconds around it generate (seen on the
Spark demo: "generation 8 tok/s  0/req · normal 28", the door line "0/req")."""

from __future__ import annotations

import pytest

from vramtop.core.diagnosis.meter import interval_rates
from vramtop.core.model import GpuReading, Sample, ServerMetrics, ServerReading, ServerState


def at(t: float, generated: float, prompts: float, running: float = 1.0) -> Sample:
    metrics = ServerMetrics(
        generation_tokens_total=generated,
        prompt_tokens_total=prompts,
        requests_running=running,
    )
    server = ServerReading(url="http://127.0.0.1:8000", reachable=True, metrics=metrics)
    return Sample(t=t, gpu=GpuReading(source="sim"), server=server)


def test_a_second_of_prefill_only_measures_no_decode_speed() -> None:
    # One request running at both ends; 3,800 prompt tokens read, no token generated.
    assert interval_rates(at(10.0, 500.0, 1000.0), at(11.0, 500.0, 4800.0), None) is None


def test_a_second_that_generated_measures_its_tokens_per_request() -> None:
    judged = interval_rates(at(10.0, 500.0, 1000.0, 2.0), at(11.0, 530.0, 1000.0, 2.0), None)
    assert judged is not None and judged.per_request_tps == 15.0


@pytest.mark.parametrize("prompts", [0.0, 12.0])
def test_requests_that_decode_nothing_and_barely_read_measure_zero(prompts: float) -> None:
    # Stuck: requests running, nothing generated, (almost) nothing read. A fall to 0.
    before, after = at(10.0, 500.0, 1000.0), at(11.0, 500.0, 1000.0 + prompts)
    judged = interval_rates(before, after, ServerState.RUNNING)
    assert judged is not None and judged.per_request_tps == 0.0
