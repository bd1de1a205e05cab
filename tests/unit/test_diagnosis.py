"""The findings engine on scenarios: what each must raise, and what it must not."""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest

from tests.support.synthetic import Card, Event, Tick, build, busy, field_report, idle
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.diagnosis.rates import NormalQuantile, counter_rate
from vramtop.core.diagnosis.server_down import startup_oom_facts
from vramtop.core.findings import (
    GPU_THROTTLING,
    KV_PRESSURE,
    SERVER_CRASHED,
    STARTUP_OUT_OF_MEMORY,
    VRAM_CONTENTION,
    Finding,
)
from vramtop.core.model import GIB, ServerState

OOM_LINE = (
    "ValueError: Free memory on device cuda:0 (30.12/31.84 GiB) on startup is less than "
    "desired GPU memory utilization (0.95, 30.25 GiB). Decrease GPU memory utilization or "
    "reduce GPU memory used by other processes."
)


def run(items: Iterable[Tick | Event], card: Card | None = None) -> Diagnoser:
    d = Diagnoser()
    for record in build(card or Card(), items):
        if isinstance(record, tuple):
            d.feed_event(*record)
        else:
            d.feed_sample(record)
    return d


def kinds(d: Diagnoser) -> list[str]:
    return [f.kind for f in d.all_findings()]


def only(d: Diagnoser, kind: str) -> Finding:
    found = [f for f in d.all_findings() if f.kind == kind]
    assert len(found) == 1, kinds(d)
    return found[0]


def started(items: list[Tick | Event]) -> list[Tick | Event]:
    return [(0.0, "start", {}), (1.0, "ready", {}), *items]


# --- the field report ----------------------------------------------------------------------


@pytest.mark.parametrize("wsl", [True, False], ids=["wsl2", "native"])
def test_field_report_is_vram_contention_within_seconds(wsl: bool) -> None:
    d = run(field_report(call_at=120, restart_at=400), Card(wsl=wsl))
    assert kinds(d) == [VRAM_CONTENTION]
    f = only(d, VRAM_CONTENTION)
    assert 120 <= f.first_seen_t < 130  # detection under 10 s at 1 Hz
    assert f.severity == "critical"
    assert f.closed_t == 400.0 and f.duration_s == pytest.approx(400.0 - f.first_seen_t)
    assert f.evidence["kv_cache_usage"] == pytest.approx(0.017)
    assert f.evidence["ratio"] < 0.2
    assert f.evidence["used_fraction"] >= 0.97
    assert set(f.ruled_out) >= {"kv_pressure", "gpu_throttling", "long_prefill"}
    assert f.ladder.observed and f.ladder.inferred and f.ladder.hypothesis
    assert f.remedy.budget <= 0.88
    assert f.remedy.details["kv_cache_tokens_after"] < f.remedy.details["kv_cache_tokens"]
    assert "." in f.summary and f.summary.count(". ") == 0  # one sentence


def test_field_report_remedy_turns_to_restart_when_the_call_is_over() -> None:
    # Native: the desktop's share is seen to grow with the call and to fall back after it.
    d = run(field_report(call_at=120, restart_at=400), Card(wsl=False))
    f = only(d, VRAM_CONTENTION)
    # The call ended at 300 and the rate stayed low until the restart: restart now.
    assert f.remedy.action == "restart"


def test_remedy_during_the_call_is_a_relaunch() -> None:
    items = field_report(call_at=120, restart_at=400)
    d = run([i for i in items if (i.t if isinstance(i, Tick) else i[0]) < 200])
    f = d.open_findings()[0]
    assert f.remedy.action == "relaunch"
    assert f.remedy.budget <= 0.88


def test_changes_report_open_then_close_once() -> None:
    d = Diagnoser()
    seen = []
    for record in build(Card(), field_report()):
        if isinstance(record, tuple):
            d.feed_event(*record)
        else:
            d.feed_sample(record)
        seen += [(c.change, c.finding.kind) for c in d.take_changes()]
    assert seen == [("opened", VRAM_CONTENTION), ("closed", VRAM_CONTENTION)]
    assert d.take_changes() == []


def test_a_long_collapse_does_not_become_the_baseline() -> None:
    items: list[Tick | Event] = [busy(float(t)) for t in range(2, 120)]
    items += [busy(float(t), tps=6.0, desktop_bytes=int(4.3 * GIB)) for t in range(120, 120 + 1800)]
    d = run(started(items))
    f = only(d, VRAM_CONTENTION)
    assert f.is_open and f.last_seen_t == 1919.0


def test_noisy_collapse_does_not_flap() -> None:
    rng = random.Random(7)
    items: list[Tick | Event] = [busy(float(t)) for t in range(2, 60)]
    for t in range(60, 400):
        # One second in four looks healthy again: noise, not a recovery.
        tps = 75.0 if rng.random() < 0.25 else 7.0
        items.append(busy(float(t), tps=tps, desktop_bytes=int(4.3 * GIB)))
    d = run(started(items))
    assert kinds(d) == [VRAM_CONTENTION]


def test_recovery_closes_with_duration() -> None:
    items: list[Tick | Event] = [busy(float(t)) for t in range(2, 60)]
    items += [busy(float(t), tps=6.0, desktop_bytes=int(4.3 * GIB)) for t in range(60, 120)]
    items += [busy(float(t)) for t in range(120, 140)]
    f = only(run(started(items)), VRAM_CONTENTION)
    assert f.closed_t is not None and 120 < f.closed_t <= 132
    assert f.duration_s == pytest.approx(f.closed_t - f.first_seen_t)


def test_slowdown_without_a_full_card_or_desktop_growth_is_not_contention() -> None:
    card = Card(util=0.7)  # plenty of room: nothing squeezes the server
    items: list[Tick | Event] = [busy(float(t)) for t in range(2, 60)]
    items += [busy(float(t), tps=6.0) for t in range(60, 200)]
    assert kinds(run(started(items), card)) == []


# --- what must stay silent ----------------------------------------------------------------


def test_idle_evening_with_long_pauses_and_a_call_while_idle() -> None:
    items: list[Tick | Event] = []
    t = 2
    for burst in range(6):
        items += [busy(float(t + i), tps=78.0 + burst) for i in range(60)]
        t += 60
        # A long pause; during one of them a call fills the card while nothing runs.
        desktop = int(4.3 * GIB) if burst == 2 else int(1.35 * GIB)
        items += [idle(float(t + i), desktop_bytes=desktop) for i in range(900)]
        t += 900
    assert kinds(run(started(items))) == []


def test_bursty_healthy_agent() -> None:
    rng = random.Random(3)
    items: list[Tick | Event] = []
    t = 2
    while t < 3600:
        running = rng.choice([1, 1, 2])
        for _ in range(rng.randint(5, 90)):
            per_request = rng.uniform(55, 90) * (0.8 if running == 2 else 1.0)
            tps = per_request * running
            if rng.random() < 0.05:
                tps *= rng.uniform(0.1, 0.4)  # a lone slow second (a request ends mid-tick)
            prompt = rng.uniform(2000, 8000) if rng.random() < 0.1 else 10.0
            items.append(busy(float(t), tps=tps, running=running, prompt_tps=prompt))
            t += 1
        for _ in range(rng.randint(1, 40)):
            items.append(idle(float(t)))
            t += 1
    assert kinds(run(started(items))) == []


def test_long_prefill_making_progress_is_not_a_collapse() -> None:
    items: list[Tick | Event] = [busy(float(t)) for t in range(2, 60)]
    items += [
        Tick(float(t), running=1, generation_tps=0.0, prompt_tps=3000.0, kv_cache_usage=0.4)
        for t in range(60, 180)
    ]
    assert kinds(run(started(items))) == []


def test_power_cap_at_full_load_is_normal() -> None:
    items = [busy(float(t), throttle=("sw_power_cap",), temperature_c=75) for t in range(2, 300)]
    assert kinds(run(started(items))) == []


def test_planned_restart_and_stop_are_silent() -> None:
    items: list[Tick | Event] = [busy(float(t)) for t in range(2, 60)]
    items.append((60.0, "restart", {"reason": "key r"}))
    items.append((61.0, "exit", {"returncode": 0, "last_lines": []}))
    items += [idle(float(t), state=ServerState.STARTING, healthy=None) for t in range(62, 90)]
    items.append((90.0, "ready", {}))
    items += [busy(float(t)) for t in range(91, 150)]
    items.append((150.0, "stop", {}))
    items += [idle(float(t), state=ServerState.STOPPING, healthy=None) for t in range(151, 153)]
    items.append((153.0, "exit", {"returncode": -15, "last_lines": ["Shutting down"]}))
    items += [idle(float(t), state=ServerState.STOPPED, healthy=None) for t in range(154, 170)]
    assert kinds(run(started(items))) == []


# --- what must be raised ---------------------------------------------------------------------


def test_kv_pressure_with_preemptions() -> None:
    items: list[Tick | Event] = [busy(float(t), running=2, tps=150) for t in range(2, 60)]
    items += [
        busy(float(t), running=2, waiting=3, tps=30.0, kv_cache_usage=0.97, preemptions=t % 2)
        for t in range(60, 120)
    ]
    d = run(started(items))
    assert kinds(d) == [KV_PRESSURE]
    f = only(d, KV_PRESSURE)
    flags = {o.flag: o for o in f.remedy.options}
    assert flags["--max-num-seqs"].value == 1
    assert flags["--max-model-len"].value == 81920
    # At 0.93 on this card the desktop has no room to give: no budget-up option.
    assert "--gpu-memory-utilization" not in flags


def test_kv_pressure_offers_a_bigger_budget_when_the_desktop_allows_it() -> None:
    card = Card(util=0.7)
    items = [
        busy(float(t), running=2, waiting=2, tps=100.0, kv_cache_usage=0.95) for t in range(2, 30)
    ]
    f = only(run(started(items), card), KV_PRESSURE)
    flags = {o.flag: o for o in f.remedy.options}
    up = flags["--gpu-memory-utilization"]
    assert up.value > 0.7 and up.details["kv_cache_tokens_after"] > up.details["kv_cache_tokens"]


def test_thermal_throttling_is_not_called_memory() -> None:
    items: list[Tick | Event] = [busy(float(t)) for t in range(2, 60)]
    items += [
        busy(
            float(t),
            tps=20.0,
            throttle=("hw_thermal", "sw_power_cap"),
            temperature_c=92,
            desktop_bytes=int(4.3 * GIB),
        )
        for t in range(60, 120)
    ]
    items += [busy(float(t)) for t in range(120, 140)]
    d = run(started(items))
    assert kinds(d) == [GPU_THROTTLING]
    f = only(d, GPU_THROTTLING)
    assert f.evidence["throttle"] == ["hw_thermal"] and f.closed_t is not None


def test_start_that_fails_for_lack_of_memory() -> None:
    items: list[Tick | Event] = [
        (0.0, "start", {}),
        (20.0, "log", {"line": OOM_LINE}),
        (21.0, "exit", {"returncode": 1, "last_lines": [OOM_LINE]}),
    ]
    d = run(items)
    assert kinds(d) == [STARTUP_OUT_OF_MEMORY]
    f = only(d, STARTUP_OUT_OF_MEMORY)
    # 30.12 of 31.84 GiB free: 0.94 (29.93 GiB) would leave less than the start margin of
    # what is free, so 0.93 is the largest that fits now.
    assert f.remedy.budget == 0.93
    assert f.evidence["free_gib"] == 30.12


def test_engine_crash_by_exit_and_by_health() -> None:
    items: list[Tick | Event] = [busy(float(t)) for t in range(2, 30)]
    items.append((30.0, "exit", {"returncode": 1, "last_lines": ["EngineCore died"]}))
    d = run(started(items))
    f = only(d, SERVER_CRASHED)
    assert f.evidence["returncode"] == 1

    items = [busy(float(t)) for t in range(2, 30)]
    items += [busy(float(t), healthy=False) for t in range(30, 35)]
    assert kinds(run(started(items))) == [SERVER_CRASHED]
    items = [busy(float(t)) for t in range(2, 30)]
    items += [idle(float(t), state=ServerState.CRASHED, healthy=None) for t in range(30, 35)]
    assert kinds(run(started(items))) == [SERVER_CRASHED]


def test_one_unhealthy_blip_is_not_a_crash() -> None:
    items: list[Tick | Event] = [busy(float(t)) for t in range(2, 30)]
    items.append(busy(30.0, healthy=False))
    items += [busy(float(t)) for t in range(31, 40)]
    assert kinds(run(started(items))) == []


# --- helpers ------------------------------------------------------------------------------------


def test_oom_line_parsing_old_and_new_formats() -> None:
    assert startup_oom_facts(OOM_LINE) == {
        "free_gib": 30.12,
        "total_gib": 31.84,
        "requested_util": 0.95,
        "requested_gib": 30.25,
    }
    old = OOM_LINE.replace("device cuda:0 ", "device ")
    assert startup_oom_facts(old) is not None
    assert startup_oom_facts("INFO all good") is None


def test_counter_rate_handles_resets_and_gaps() -> None:
    assert counter_rate(100.0, 177.0, 1.0) == 77.0
    assert counter_rate(100.0, 5.0, 1.0) is None  # server restarted
    assert counter_rate(None, 5.0, 1.0) is None
    assert counter_rate(1.0, 5.0, 120.0) is None


def test_baseline_is_a_high_quantile_after_warmup() -> None:
    b = NormalQuantile(warmup=5)
    for r in (70, 80, 75, 78):
        b.add(r)
    assert b.value is None
    b.add(90)
    assert b.value == 90


# --- review fixes ----------------------------------------------------------------------------


def test_a_hot_card_that_stalls_completely_counts_as_slow() -> None:
    # 0 tok/s is the slowest a card can be: a ratio of 0.0 must not read as "unknown".
    items: list[Tick | Event] = [busy(float(t)) for t in range(2, 60)]
    items += [busy(float(t), tps=0.0, temperature_c=93) for t in range(60, 80)]
    assert GPU_THROTTLING in kinds(run(started(items), Card(util=0.7)))


def test_contention_never_opens_on_an_idle_sample() -> None:
    # A slowdown with room on the card is not contention; a call that starts after the
    # requests ended must not turn those old slow seconds into a finding while idle.
    items: list[Tick | Event] = [busy(float(t)) for t in range(2, 60)]
    items += [busy(float(t), tps=6.0) for t in range(60, 70)]
    items += [idle(float(t), desktop_bytes=int(6 * GIB)) for t in range(70, 200)]
    assert kinds(run(started(items), Card(util=0.7))) == []


def test_malformed_oom_numbers_are_ignored_not_raised() -> None:
    bad = OOM_LINE.replace("30.12/", "30.1.2/")
    assert startup_oom_facts(bad) is None
    d = Diagnoser()
    d.feed_event(1.0, "log", {"line": bad})
    d.feed_event(2.0, "exit", {"returncode": 1, "last_lines": 7})
    assert kinds(d) == [SERVER_CRASHED]


def test_contention_remedy_never_proposes_a_budget_too_small_for_one_request() -> None:
    # A desktop peak of 8 GiB beside a 19 GiB model on a 32 GB card leaves a pool that cannot
    # hold one 65,536-token request: vLLM would refuse that start, so the remedy lowers
    # --max-model-len with the budget, to a round figure one request of which fits.
    items: list[Tick | Event] = [busy(float(t)) for t in range(2, 120)]
    items += [busy(float(t), tps=6.0, desktop_bytes=8 * GIB) for t in range(120, 200)]
    card = Card(wsl=False, max_model_len=65_536)
    f = only(run(started(items), card), VRAM_CONTENTION)
    util = f.remedy.budget
    after = f.remedy.details["kv_cache_tokens_after"]
    length = f.remedy.max_model_len
    assert length is not None and 8_192 <= length <= after < card.max_model_len
    assert length % 1_024 == 0  # a figure a person would type
    assert f.remedy.details["current_max_model_len"] == card.max_model_len
    assert f"--max-model-len {length:,}" in (f.remedy.why or "")
    assert f.remedy.details["leaves_desktop_peak"] is True
    assert 0 < util < card.util


def test_contention_remedy_never_proposes_a_budget_with_no_pool() -> None:
    # This server already runs below one max-model-len request (0.74x, as the field report's
    # hybrid model does): the floor is then a pool that is not empty.
    items: list[Tick | Event] = [busy(float(t)) for t in range(2, 120)]
    items += [busy(float(t), tps=6.0, desktop_bytes=14 * GIB) for t in range(120, 200)]
    f = only(run(started(items), Card(wsl=False)), VRAM_CONTENTION)
    assert f.remedy.kv_pool_bytes_after > 0 and f.remedy.details["kv_cache_tokens_after"] > 0
    assert f.remedy.details["leaves_desktop_peak"] is False


def test_kv_remedy_reads_max_num_seqs_as_vllm_does() -> None:
    items = [
        busy(float(t), running=2, waiting=2, tps=100.0, kv_cache_usage=0.95) for t in range(2, 30)
    ]
    card = Card(argv=("vllm", "serve", "m", "--max-num-seqs", "2", "--max-num-seqs=8"))
    f = only(run(started(items), card), KV_PRESSURE)
    flags = {o.flag: o for o in f.remedy.options}
    assert flags["--max-num-seqs"].value == 4  # the last occurrence wins
