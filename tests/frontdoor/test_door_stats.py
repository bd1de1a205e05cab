"""The door's figures (pure): percentiles, and the SSE tally however the stream is cut."""

from __future__ import annotations

import statistics
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from vramtop.core.door_stats import RequestTiming, SseTally, is_token_event, percentile, summarize

CHAT_STREAM = (
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    + b"".join(
        b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"t%d"}}]}\n\n' % i
        for i in range(12)
    )
    + b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":12}}\n\n'
    + b"data: [DONE]\n\n"
)


def test_percentile_matches_the_interpolating_quantile() -> None:
    values = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0]
    assert percentile(values, 0.5) == statistics.median(values)
    assert percentile([], 0.5) is None
    assert percentile([7.0], 0.95) == 7.0
    assert percentile([0.0, 10.0], 0.95) == 9.5


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=2, max_size=60))
def test_percentile_agrees_with_statistics(values: list[float]) -> None:
    exact = statistics.quantiles(values, n=20, method="inclusive")[18]
    got = percentile(values, 0.95)
    assert got is not None and abs(got - exact) <= 1e-6 * max(1.0, abs(exact))


def test_summary_leaves_out_what_no_request_measured() -> None:
    timings = [RequestTiming(e2e_s=1.0), RequestTiming(e2e_s=3.0, ttft_s=0.5, decode_tps=40.0)]
    summary = summarize(timings)
    assert (summary.e2e_p50_s, summary.ttft_p50_s, summary.decode_tps_p50) == (2.0, 0.5, 40.0)
    assert summarize([]).fields() == dict.fromkeys(summary.fields())


def test_events_that_carry_no_text_are_not_counted() -> None:
    assert not is_token_event(b"data: [DONE]")
    assert not is_token_event(b": ping")
    assert not is_token_event(b'data: {"choices": [], "usage": {}}')
    assert not is_token_event(b'data: {"choices":[{"delta":{"role":"assistant"}}]}')
    assert is_token_event(b'data: {"choices":[{"delta":{"content":"[DONE]"}}]}')


@given(st.lists(st.integers(0, len(CHAT_STREAM)), max_size=30))
def test_the_tally_counts_the_same_however_the_stream_is_cut(cuts: list[int]) -> None:
    points = sorted({0, len(CHAT_STREAM), *cuts})
    tally = SseTally()
    for n, (a, b) in enumerate(pairwise(points)):
        tally.feed(CHAT_STREAM[a:b], float(n))
    assert tally.events == 15
    assert tally.token_events == 12


def test_decode_speed_is_events_after_the_first_over_their_time() -> None:
    tally = SseTally()
    for i in range(11):
        tally.feed(b'data: {"choices":[{"text":"x"}]}\n\n', 1.0 + i * 0.05)
    assert tally.decode_tps() is not None
    assert abs((tally.decode_tps() or 0) - 20.0) < 1e-9
    one = SseTally()
    one.feed(b'data: {"choices":[{"text":"x"}]}\n\n' * 5, 1.0)
    assert one.decode_tps() is None  # all in one chunk: no time to divide by


def test_a_burst_first_chunk_is_not_counted_as_decoded_in_the_time() -> None:
    tally = SseTally()
    event = b'data: {"choices":[{"text":"x"}]}\n\n'
    tally.feed(event * 30, 2.0)  # a backlog the server sent at once
    tally.feed(event * 10, 2.5)
    assert tally.token_events == 40
    assert tally.decode_tps() == 20.0
