"""Speculative decoding (MTP): vLLM's latency histogram observes one latency per output event,
and an event can carry several tokens (vLLM PR #52853). The decode rate from the histogram is
corrected by the tokens each observation carried."""

from __future__ import annotations

import pytest

from vramtop.core.diagnosis.normal_rate import decode_tps
from vramtop.core.model import ServerMetrics
from vramtop.core.vllm.metrics import parse_metrics, tokens_per_observation


def _metrics(
    generated: float, events: float, seconds: float, first: float | None = None
) -> ServerMetrics:
    return ServerMetrics(
        generation_tokens_total=generated,
        inter_token_latency_count=events,
        inter_token_latency_sum_s=seconds,
        first_token_count=first,
    )


def test_mtp_events_of_several_tokens_give_the_tokens_decoded_per_second() -> None:
    # 40 output events a second of decoding, 2.5 tokens each (MTP with 3 proposals): 100 tok/s.
    before = _metrics(10_000, 4_000, 100.0, first=20)
    after = _metrics(10_250, 4_100, 102.5, first=20)
    assert tokens_per_observation(before, after) == pytest.approx(2.5)
    assert decode_tps(before, after) == pytest.approx(100.0)


def test_the_first_tokens_of_requests_are_not_taken_for_speculation() -> None:
    # No speculation: 100 events, 104 tokens, of which 4 first tokens of requests begun.
    before = _metrics(10_000, 9_900, 100.0, first=100)
    after = _metrics(10_104, 10_000, 102.5, first=104)
    assert tokens_per_observation(before, after) == 1.0
    assert decode_tps(before, after) == pytest.approx(40.0)


def test_without_first_token_counts_a_small_excess_is_not_speculation() -> None:
    # A recording keeps no first-token count: 1 new request among 80 events is noise ...
    before, after = _metrics(1_000, 990, 10.0), _metrics(1_081, 1_070, 12.0)
    assert tokens_per_observation(before, after) == 1.0
    # ... while 2 tokens an event is speculation.
    before, after = _metrics(1_000, 990, 10.0), _metrics(1_160, 1_070, 12.0)
    assert tokens_per_observation(before, after) == pytest.approx(2.0)
    assert decode_tps(before, after) == pytest.approx(80.0)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (_metrics(1_000, 990, 10.0), _metrics(500, 1_070, 12.0)),  # a reset
        (_metrics(1_000, 990, 10.0), _metrics(1e9, 1_070, 12.0)),  # no method gives that
        (ServerMetrics(inter_token_latency_count=1.0), ServerMetrics()),  # unknown
        (_metrics(1_000, 990, 10.0), _metrics(1_100, 990, 10.0)),  # no observation
    ],
)
def test_a_ratio_that_cannot_be_told_is_one(before: ServerMetrics, after: ServerMetrics) -> None:
    assert tokens_per_observation(before, after) == 1.0


def test_the_first_token_count_is_read_from_the_page() -> None:
    page = (
        'vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 12.0\n'
        'vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} 3.0\n'
        'vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.5\n'
    )
    assert parse_metrics(page).first_token_count == 15.0
