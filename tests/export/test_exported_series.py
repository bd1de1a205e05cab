"""What one sample exposes (pure): a server that went away exports no pool, queue or rate; the
per-request decode rate beside its own normal; counters that span restarts; identity."""

from __future__ import annotations

from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.diagnosis.normal_rate import INTER_TOKEN_LATENCY, PER_REQUEST, NormalRate
from vramtop.core.diagnosis.throughput import ThroughputView
from vramtop.core.exposition import ExportState, Tally, series_for, tally
from vramtop.core.model import (
    GIB,
    CacheConfig,
    GpuDevice,
    GpuReading,
    Sample,
    ServerInfo,
    ServerMetrics,
    ServerReading,
    ServerState,
)
from vramtop.core.series import Series
from vramtop.core.server_events import Event

CARD = GpuReading(devices=(GpuDevice(0, "card", 32 * GIB, 30 * GIB, 2 * GIB),), source="sim")
URL = "http://127.0.0.1:8000"
NORMAL = NormalRate(by_measure={INTER_TOKEN_LATENCY: {1: 80.0, 2: 70.0}, PER_REQUEST: {2: 60.0}})


def metrics(
    t: float, *, running: float = 2, tokens_per_s: float = 70.0, **kw: float
) -> ServerMetrics:
    """A /metrics reading at `t` of requests each decoding at `tokens_per_s`."""
    decoded = t * tokens_per_s * running
    fields: dict[str, object] = {
        "generation_tokens_total": decoded,
        "prompt_tokens_total": 10.0 * t,
        "requests_running": running,
        "requests_waiting": 0.0,
        "preemptions_total": 0.0,
        "kv_cache_usage": 0.2,
        "model_name": "qwen",
        "cache": CacheConfig(kv_cache_memory_bytes=9 * GIB, kv_cache_size_tokens=100_000),
        "inter_token_latency_count": decoded,
        "inter_token_latency_sum_s": decoded / tokens_per_s,
    }
    fields.update(kw)
    return ServerMetrics(**fields)  # type: ignore[arg-type]


def sample(
    t: float,
    m: ServerMetrics | None,
    *,
    state: ServerState | None = ServerState.RUNNING,
    stale: bool = False,
    reachable: bool = True,
) -> Sample:
    server = ServerReading(URL, reachable=reachable, metrics=m, stale=stale, version="0.32")
    info = (
        None
        if state is None
        else ServerInfo(state=state, profile="desk", argv=("vllm", "serve", "qwen"))
    )
    return Sample(t=t, gpu=CARD, server=server, info=info)


def viewed(previous: Sample, now: Sample) -> ThroughputView | None:
    """The throughput view of `now`, as the diagnosis makes it with NORMAL remembered."""
    diagnoser = Diagnoser(remembered=NORMAL)
    diagnoser.feed_sample(previous)
    diagnoser.feed_sample(now)
    return diagnoser.throughput


def exposed(state: ExportState) -> dict[str, float]:
    def key(s: Series) -> str:
        labels = ",".join(f"{k}={v}" for k, v in s.labels)
        return f"{s.name}{{{labels}}}" if labels else s.name

    return {key(s): s.value for s in series_for(state)}


def names(state: ExportState) -> set[str]:
    return {s.name for s in series_for(state)}


NOW_SERIES = {
    "vramtop_kv_pool_bytes",
    "vramtop_kv_pool_tokens",
    "vramtop_kv_cache_usage_ratio",
    "vramtop_requests_running",
    "vramtop_requests_waiting",
    "vramtop_generation_normal_tokens_per_second",
    "vramtop_decode_normal_tokens_per_second",
    "vramtop_request_decode_tokens_per_second",
    "vramtop_request_decode_normal_tokens_per_second",
}


def test_a_serving_server_exports_its_pool_rates_and_normals() -> None:
    state = ExportState(
        "t",
        sample(11, metrics(11)),
        throughput=viewed(sample(10, metrics(10)), sample(11, metrics(11))),
    )
    assert names(state) >= NOW_SERIES


def test_a_stopped_crashed_or_silent_server_exports_none_of_what_described_it() -> None:
    kept = metrics(10)  # the scraper keeps the last good reading, marked stale
    for gone in (
        sample(11, kept, state=ServerState.STOPPED, reachable=False, stale=True),
        sample(11, kept, state=ServerState.CRASHED, reachable=False, stale=True),
        sample(11, kept, state=None, reachable=True, stale=True),  # a URL that stopped answering
        sample(11, metrics(11), state=ServerState.STOPPED),  # recorded stopped
    ):
        state = ExportState("t", gone, throughput=viewed(sample(10, kept), gone))
        assert names(state) & NOW_SERIES == set(), gone
        seen = exposed(state)
        assert seen["vramtop_server_up"] == float(gone.server is not None and not gone.server.stale)
        # What the box is set up to serve stays named.
        profile = "desk" if gone.info is not None else ""
        assert seen[f"vramtop_server_info{{profile={profile},model=qwen,vllm_version=0.32}}"] == 1.0


def test_the_per_request_rate_stands_beside_the_normal_of_its_own_measure_and_concurrency() -> None:
    # Three requests, two reading their prompts: 60 tok/s in total, but each one that decodes
    # does so at 68 per its latency histogram; the normal for 3 running (bucket 2) is 70.
    before = metrics(10, running=3, tokens_per_s=68.0)
    now = metrics(11, running=3, tokens_per_s=68.0)
    now = ServerMetrics(
        **{**now.__dict__, "generation_tokens_total": before.generation_tokens_total + 60}
    )  # type: ignore[arg-type]
    seen = exposed(
        ExportState("t", sample(11, now), throughput=viewed(sample(10, before), sample(11, now)))
    )
    rate = seen["vramtop_request_decode_tokens_per_second{measure=inter_token_latency}"]
    assert round(rate) == 68
    assert (
        seen["vramtop_request_decode_normal_tokens_per_second{measure=inter_token_latency}"] == 70.0
    )


def test_without_the_histogram_the_fallback_measure_and_its_normal_are_used() -> None:
    bare = {"inter_token_latency_count": None, "inter_token_latency_sum_s": None}
    before, now = metrics(10, **bare), metrics(11, **bare)  # type: ignore[arg-type]
    seen = exposed(
        ExportState("t", sample(11, now), throughput=viewed(sample(10, before), sample(11, now)))
    )
    assert seen["vramtop_request_decode_tokens_per_second{measure=per_request}"] == 70.0
    assert seen["vramtop_request_decode_normal_tokens_per_second{measure=per_request}"] == 60.0
    # A second that also read a prompt is its own measure (prefill lowers the total).
    reading = metrics(12, prompt_tokens_total=now.prompt_tokens_total + 5000, **bare)  # type: ignore[arg-type]
    seen = exposed(
        ExportState(
            "t", sample(12, reading), throughput=viewed(sample(11, now), sample(12, reading))
        )
    )
    assert "vramtop_request_decode_tokens_per_second{measure=per_request_prefill}" in seen


def test_expected_up_is_0_only_for_a_server_stopped_on_request() -> None:
    def expected(s: Sample) -> float:
        return exposed(ExportState("t", s))["vramtop_server_expected_up"]

    assert expected(sample(1, metrics(1))) == 1.0
    assert expected(sample(1, None, state=None, reachable=False)) == 1.0  # a watched URL, down
    assert expected(sample(1, None, state=ServerState.CRASHED, reachable=False)) == 1.0
    assert expected(sample(1, None, state=ServerState.STARTING, reachable=False)) == 1.0
    assert expected(sample(1, None, state=ServerState.STOPPED, reachable=False)) == 0.0


def test_counters_span_restarts_and_count_crashes_and_findings() -> None:
    counts = Tally()
    counts = tally(counts, sample(1, metrics(1)), [])  # the first reading is counted from
    counts = tally(counts, sample(2, metrics(2)), [])
    assert counts.generation_tokens == 140.0 and counts.restarts == 0
    opened = Event(3, "finding", {"kind": "server_crashed", "change": "opened"})
    counts = tally(
        counts,
        sample(3, metrics(2), state=ServerState.CRASHED, reachable=False, stale=True),
        [Event(3, "exit"), opened],
    )
    # It starts again; its counters start from 0 and the new server's tokens count whole.
    counts = tally(
        counts, sample(4, None, state=ServerState.STARTING, reachable=False), [Event(4, "start")]
    )
    counts = tally(counts, sample(5, metrics(0.5)), [Event(5, "ready")])
    assert counts.restarts == 1 and counts.crashes == 1
    assert counts.findings_opened == {"server_crashed": 1}
    assert counts.generation_tokens == 140.0 + 70.0
    seen = exposed(ExportState("t", sample(5, metrics(0.5)), counts=counts))
    assert seen["vramtop_server_restarts_total"] == 1.0
    assert seen["vramtop_server_crashes_total"] == 1.0
    assert seen["vramtop_findings_opened_total{kind=server_crashed}"] == 1.0
    assert seen["vramtop_findings_opened_total{kind=vram_contention}"] == 0.0
    assert seen["vramtop_generation_tokens_total"] == 210.0


def test_a_watched_url_whose_counters_fall_counted_a_restart() -> None:
    counts = tally(Tally(), sample(1, metrics(10), state=None), [])
    counts = tally(counts, sample(2, metrics(1), state=None), [])
    assert counts.restarts == 1
    assert counts.generation_tokens == metrics(1).generation_tokens_total


def test_every_counter_is_there_at_0_before_the_first_sample() -> None:
    seen = exposed(ExportState("t"))
    assert seen["vramtop_server_restarts_total"] == 0.0
    assert seen["vramtop_generation_tokens_total"] == 0.0
    assert seen["vramtop_findings_opened_total{kind=kv_pressure}"] == 0.0
