"""The simulated cards' memory models and pressure scenarios (ledger only: simulated time), and
the simulated GPU probe presenting each the way its driver would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vramtop.core.model import MemoryKind
from vramtop.sim import scenario as scenarios
from vramtop.sim.card import CARDS, GIB, MIB, plan_kv
from vramtop.sim.gpu_probe import SimGpuProbe
from vramtop.sim.ledger import Ledger

SERVER = 1234


def card_ledger(key: str) -> Ledger:
    card = CARDS[key]
    return Ledger(scenarios.load(card.scenario), total=card.total_mib * MIB, card=card)


def start_server(lg: Ledger, key: str) -> None:
    """What the demo's server takes: its budget at the card's util, plus the CUDA context."""
    plan = plan_kv(CARDS[key].budget, total=lg.total, kv_cache_dtype="fp8", max_model_len=163_840)
    assert lg.alloc(SERVER, "VLLM::EngineCore", plan.footprint)["ok"]


def run_call(lg: Ledger, seconds: float) -> None:
    lg.set_call(True)
    for t in range(1, int(seconds) + 1):
        lg.advance(float(t))


def probe_device(state: dict[str, Any]) -> Any:
    return SimGpuProbe(Path("/nonexistent"))._device(state)


def test_spark_is_one_pool_and_its_desktop_is_system_memory() -> None:
    lg = card_ledger("spark")
    start_server(lg, "spark")
    lg.advance(1)
    state = lg.state()
    assert state["device"]["name"] == "NVIDIA GB10"
    assert state["device"]["memory_kind"] == "unified"
    assert "gtt_used_bytes" not in state["device"]
    device = probe_device(state)
    assert device.memory_kind is MemoryKind.UNIFIED
    assert device.processes is not None
    names = {p.name for p in device.processes}
    # NVML lists GPU processes only: the browser's and the build's memory is the system's.
    assert "firefox" not in names and "cc1plus" not in names and "VLLM::EngineCore" in names
    assert 8 * GIB < lg.desktop_bytes() < 10 * GIB
    assert lg.condition(SERVER)["spilled_bytes"] == 0


def test_spark_pressure_a_growing_build_squeezes_vllm_and_its_rate() -> None:
    lg = card_ledger("spark")
    start_server(lg, "spark")
    lg.advance(0)
    healthy = lg.condition(SERVER)["rate_factor"]
    assert healthy == CARDS["spark"].decode_scale  # uncontended: the Spark's own speed
    run_call(lg, 90)
    cond = lg.condition(SERVER)
    assert lg.free_bytes() < 0.1 * GIB  # the pool is exhausted (MemAvailable near 0)
    assert cond["spilled_bytes"] > 3 * GIB  # paged out of the shared pool
    assert cond["rate_factor"] < healthy / 4


def test_r9700_call_evicts_vllm_into_gtt_reported_per_process() -> None:
    lg = card_ledger("r9700")
    start_server(lg, "r9700")
    lg.advance(0)
    before = lg.state()
    assert before["device"]["gtt_used_bytes"] < 256 * MIB
    healthy = lg.condition(SERVER)["rate_factor"]
    run_call(lg, 30)
    state = lg.state()
    server = next(p for p in state["processes"] if p["pid"] == SERVER)
    assert server["gtt_bytes"] > 1 * GIB
    assert state["device"]["gtt_used_bytes"] >= server["gtt_bytes"]
    device = probe_device(state)
    assert device.memory_kind is MemoryKind.DEDICATED
    assert device.gtt_total_bytes == CARDS["r9700"].gtt_total_mib * MIB
    assert device.processes is not None
    assert next(p for p in device.processes if p.pid == SERVER).gtt_bytes == server["gtt_bytes"]
    assert lg.condition(SERVER)["rate_factor"] < healthy / 3


def test_the_5090_keeps_the_field_report_model() -> None:
    lg = card_ledger("5090")
    state = lg.state()
    assert state["device"]["name"] == "NVIDIA GeForce RTX 5090"
    assert state["device"]["memory_kind"] == "dedicated"
    assert all("gtt_bytes" not in p for p in state["processes"])
    assert CARDS["5090"].budget == 0.93


def test_the_native_demo_lists_a_linux_desktops_processes() -> None:
    # Every bundled scenario with Windows programs: read natively (no --wsl), the card's
    # processes are a Linux desktop's; the Windows side (--wsl) keeps its programs' names.
    for name in scenarios.available():
        lg = Ledger(scenarios.load(name), total=CARDS["5090"].total_mib * MIB, card=CARDS["5090"])
        lg.advance(1)
        device = probe_device(dict(lg.state()))
        assert device.processes is not None
        names = {p.name for p in device.processes}
        assert names and not any(n.endswith(".exe") for n in names), (name, names)
    windows = {p["name"] for p in card_ledger("5090").state()["processes"]}
    assert "dwm.exe" in windows  # what the Windows counters (--wsl) are named after
