"""The card's ledger and contention model, in simulated time (no processes, no clock)."""

from __future__ import annotations

import pytest

from vramtop.sim import scenario as scenarios
from vramtop.sim.card import GIB, MIB, plan_kv
from vramtop.sim.ledger import Ledger
from vramtop.sim.serving import BASE_TPS

SERVER = 1234


def ledger(name: str = "manual") -> Ledger:
    return Ledger(scenarios.load(name), total=32_607 * MIB)


def tps(lg: Ledger) -> float:
    return BASE_TPS * lg.condition(SERVER)["rate_factor"]


def test_field_report_kv_pool_at_093_and_085() -> None:
    p93 = plan_kv(0.93, kv_cache_dtype="fp8", max_model_len=262_144)
    p85 = plan_kv(0.85, kv_cache_dtype="fp8", max_model_len=262_144)
    assert round(p93.kv_bytes / GIB, 2) == 9.26
    assert p93.tokens == 269_696
    # The field report's ceilings: 262,144 fits at 0.93 and not at 0.85, where 163,840 does.
    assert p93.request_bytes(262_144) <= p93.kv_bytes and f"{p93.max_concurrency:.2f}" == "1.03"
    assert round(p85.kv_bytes / GIB, 2) == 6.71
    assert p85.request_bytes(262_144) > p85.kv_bytes
    assert p85.request_bytes(163_840) <= p85.kv_bytes
    # bf16 KV costs twice the bytes per token; eager mode gives the graph memory to the pool.
    assert plan_kv(0.93).tokens == pytest.approx(p93.tokens / 2, rel=0.01)
    assert plan_kv(0.93, enforce_eager=True).kv_bytes > plan_kv(0.93).kv_bytes


def test_alloc_within_free_memory_and_refusal_with_numbers() -> None:
    lg = ledger()
    free = lg.free_bytes()
    assert lg.alloc(SERVER, "VLLM::EngineCore", 10 * GIB)["ok"]
    assert lg.free_bytes() == pytest.approx(free - 10 * GIB, abs=0.05 * GIB)
    refused = lg.alloc(99, "other", 40 * GIB)
    assert not refused["ok"]
    assert refused["total_bytes"] == 32_607 * MIB
    assert refused["free_bytes"] == pytest.approx(lg.free_bytes(), abs=0.05 * GIB)
    assert "out of memory" in refused["error"]
    assert lg.free(SERVER) == 10 * GIB
    assert lg.free(SERVER) == 0


def test_idle_desktop_is_about_one_and_a_half_gib() -> None:
    lg = ledger("field_report")
    lg.advance(5)
    assert 1.2 * GIB < lg.desktop_bytes() < 1.8 * GIB
    assert not lg.call_on


def test_call_grows_the_desktop_within_seconds_and_shrinks_after() -> None:
    # A video call takes its memory within a few seconds of joining; the long_call scenario
    # keeps one that grows for a minute.
    lg = ledger()
    idle = lg.desktop_bytes()
    lg.set_call(True)
    lg.advance(2)
    half = lg.desktop_bytes()
    lg.advance(5)
    full = lg.desktop_bytes()
    assert 1.2 * GIB < half - idle < 1.8 * GIB
    assert 2.0 * GIB < full - idle < 3.2 * GIB
    slow = ledger("long_call")
    slow.set_call(True)
    slow.advance(30)
    assert 1.2 * GIB < slow.desktop_bytes() - idle < 1.8 * GIB
    lg.set_call(False)
    lg.advance(30)
    assert lg.desktop_bytes() == pytest.approx(idle, abs=0.05 * GIB)


def test_scenarios_schedule_calls_and_hot_spells() -> None:
    lg = ledger("field_report")
    lg.advance(30)
    assert not lg.call_on
    lg.advance(100)
    assert lg.call_on and lg.call_level == 1.0
    hot = ledger("thermal")
    hot.advance(60)
    temp, clock, throttle = hot.thermal()
    assert temp >= 85 and "sw_thermal" in throttle and clock < hot.scenario.sm_clock_mhz


def test_at_093_a_call_collapses_the_rate_and_it_stays_low_until_restart() -> None:
    lg = ledger()
    footprint = plan_kv(0.93, kv_cache_dtype="fp8").footprint
    assert lg.alloc(SERVER, "VLLM::EngineCore", footprint)["ok"]
    lg.advance(1)
    assert tps(lg) > 75
    lg.set_call(True)
    lg.advance(30)
    cond = lg.condition(SERVER)
    assert 2.0 * GIB < cond["spilled_bytes"] < 3.0 * GIB
    assert 7 <= tps(lg) <= 11
    lg.set_call(False)
    lg.advance(60)
    assert lg.condition(SERVER)["spilled_bytes"] > 2.0 * GIB  # sticky
    assert tps(lg) < 12
    # A restart: the process frees everything and allocates again.
    lg.free(SERVER)
    assert lg.alloc(SERVER, "VLLM::EngineCore", footprint)["ok"]
    lg.advance(61)
    assert tps(lg) > 75


def test_the_onset_is_recorded_when_the_memory_first_slows_decoding() -> None:
    lg = ledger()
    assert lg.alloc(SERVER, "VLLM::EngineCore", plan_kv(0.93, kv_cache_dtype="fp8").footprint)
    for t in range(1, 11):
        lg.advance(t)
    server = lg.state()["servers"][0]
    assert server["slowed_at"] is None and server["collapsed_at"] is None
    lg.set_call(True)
    t = 10.0
    while lg.state()["servers"][0]["collapsed_at"] is None and t < 30:
        t += 0.1
        lg.advance(t)
    server = lg.state()["servers"][0]
    # From the previous step of the clock: at most 0.1 s before the factor was seen.
    assert 10.0 <= server["slowed_at"] < server["collapsed_at"] < t
    assert lg.condition(SERVER)["rate_factor"] < 1 / 3
    # A restart: the new allocation decodes at full speed, with no onset.
    lg.free(SERVER)
    lg.set_call(False)
    lg.advance(t + 10)
    assert lg.alloc(SERVER, "VLLM::EngineCore", plan_kv(0.93, kv_cache_dtype="fp8").footprint)
    lg.advance(t + 11)
    assert lg.state()["servers"][0]["slowed_at"] is None


def test_a_spill_slows_prefill_far_less_than_decoding() -> None:
    # Decoding reads the weights for every token; prefill once per chunk of 8,192.
    lg = ledger()
    assert lg.alloc(SERVER, "VLLM::EngineCore", plan_kv(0.93, kv_cache_dtype="fp8").footprint)
    lg.advance(1)
    lg.set_call(True)
    lg.advance(30)
    cond = lg.condition(SERVER)
    assert cond["rate_factor"] < 0.2
    # The full card's paging still costs it the mild dip a decode step would see without
    # the spill.
    assert cond["prefill_factor"] > 3 * cond["rate_factor"]


def test_at_085_the_same_call_costs_only_a_mild_dip() -> None:
    lg = ledger()
    assert lg.alloc(SERVER, "VLLM::EngineCore", plan_kv(0.85, kv_cache_dtype="fp8").footprint)
    lg.advance(1)
    before = tps(lg)
    lg.set_call(True)
    lg.advance(30)
    during = tps(lg)
    assert lg.condition(SERVER)["spilled_bytes"] == 0
    assert 0.5 < during / before < 0.8  # ~83 → ~52 in the field report
    lg.set_call(False)
    lg.advance(60)
    assert tps(lg) == pytest.approx(before, rel=0.02)


def test_state_lists_desktop_and_server_processes() -> None:
    lg = ledger("field_report")
    lg.alloc(SERVER, "VLLM::EngineCore", 5 * GIB)
    lg.advance(1)
    st = lg.state()
    kinds = {p["name"]: p["kind"] for p in st["processes"]}
    assert kinds["VLLM::EngineCore"] == "server"
    assert {"dwm.exe", "msedge.exe", "ms-teams.exe"} <= set(kinds)
    dev = st["device"]
    assert dev["used_bytes"] + dev["free_bytes"] == dev["total_bytes"] == 32_607 * MIB
    assert dev["name"] == "NVIDIA GeForce RTX 5090"
    assert st["servers"][0]["spill_fraction"] == 0.0


def test_unknown_scenario_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="bundled ones"):
        scenarios.load("no-such-thing")
