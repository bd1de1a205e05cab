"""What the simulated card says it is doing: PCIe RX in the GB/s while decoding from host
memory, ~0.3 GB/s before; utilisation; WSL2's residency failures. The ledger in simulated
time first, then the real world daemon, a simulated server and the GPU probe."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sim.sim_load import SPEED, Agent, wait_call_level
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.sim import scenario as scenarios
from vramtop.sim.card import CARDS, MIB, plan_kv
from vramtop.sim.ledger import Ledger

SERVER = 1234
GB = 1e9


def serving(card: str = "5090", util: float = 0.93) -> Ledger:
    lg = Ledger(scenarios.load("manual"), total=CARDS[card].total_mib * MIB, card=CARDS[card])
    assert lg.alloc(SERVER, "VLLM::EngineCore", plan_kv(util, kv_cache_dtype="fp8").footprint)
    lg.advance(1)
    return lg


def device(lg: Ledger) -> dict[str, Any]:
    dev: dict[str, Any] = lg.state()["device"]
    return dev


def test_pcie_rx_rises_to_about_12_gb_s_while_decoding_from_host_memory() -> None:
    lg = serving()
    idle = device(lg)
    lg.condition(SERVER, decoding=True)
    before = device(lg)
    lg.set_call(True)
    lg.advance(30)
    during = device(lg)
    assert lg.condition(SERVER)["spilled_bytes"] > 2 * 1024**3
    assert idle["pcie_rx_bytes_per_s"] < 0.1 * GB
    assert 0.2 * GB < before["pcie_rx_bytes_per_s"] < 0.4 * GB
    assert 10 * GB < during["pcie_rx_bytes_per_s"] < 14 * GB
    # The GPU stays busy (its kernels wait on PCIe); its memory goes quiet.
    assert before["gpu_util"] >= 0.9 and during["gpu_util"] >= 0.9 and idle["gpu_util"] < 0.1
    assert before["memory_util"] > 0.5 and during["memory_util"] < before["memory_util"] / 3
    # Between two turns of the agent the spill moves nothing.
    lg.condition(SERVER, decoding=False)
    assert device(lg)["pcie_rx_bytes_per_s"] < 0.1 * GB


def test_at_085_the_same_call_spills_nothing_and_pcie_stays_low() -> None:
    lg = serving(util=0.85)
    lg.condition(SERVER, decoding=True)
    lg.set_call(True)
    lg.advance(30)
    assert lg.condition(SERVER)["spilled_bytes"] == 0
    assert device(lg)["pcie_rx_bytes_per_s"] < 0.4 * GB


def test_residency_failures_are_logged_while_a_spilled_server_decodes_during_the_call() -> None:
    lg = serving()
    lg.condition(SERVER, decoding=True)
    for t in range(2, 60):
        lg.advance(t)
    assert device(lg)["residency_failures_total"] == 0  # no call: all of it on the card
    lg.set_call(True)
    for t in range(60, 90):
        lg.advance(t)
    during = device(lg)["residency_failures_total"]
    assert during >= 30  # about two a second while the call holds the memory
    lg.condition(SERVER, decoding=False)  # an idle server touches nothing: no new lines
    for t in range(90, 100):
        lg.advance(t)
    assert device(lg)["residency_failures_total"] == during


@pytest.mark.parametrize(
    ("card", "pcie", "util"), [("spark", False, True), ("r9700", False, False)]
)
def test_other_machines_give_what_their_probes_read(card: str, pcie: bool, util: bool) -> None:
    lg = serving(card, CARDS[card].budget)
    lg.condition(SERVER, decoding=True)
    dev = device(lg)
    assert ("pcie_rx_bytes_per_s" in dev) is pcie and ("residency_failures_total" in dev) is pcie
    assert ("gpu_util" in dev) is util


def test_the_probe_reads_them_from_a_running_world(
    machine_factory: Any, server_factory: Any
) -> None:
    m = machine_factory(speed=SPEED, wsl=True)
    s = server_factory(m, 0.93)
    assert s.wait_ready()
    probe = m.probe()
    idle = probe.read()
    assert idle.available and idle.residency_failures == 0
    assert idle.devices[0].pcie_rx_bytes_per_s is not None
    assert idle.devices[0].pcie_rx_bytes_per_s < 0.1 * GB
    agent = Agent(s.url)
    try:
        before = _read_until(probe, lambda d: d.gpu_util is not None and d.gpu_util > 0.9)
        assert before.pcie_rx_bytes_per_s is not None
        assert before.pcie_rx_bytes_per_s < 0.5 * GB
        m.set_call(True)
        wait_call_level(m, 1.0)
        during = _read_until(probe, lambda d: (d.pcie_rx_bytes_per_s or 0) > 5 * GB)
        assert during.pcie_rx_bytes_per_s is not None and during.pcie_rx_bytes_per_s < 14 * GB
        wait_until(
            lambda: probe.read().residency_failures,
            deadline_s=PROCESS_S,
            what="a residency failure read",
            poll_s=0.1,
        )
    finally:
        agent.close()
        probe.close()


def _read_until(probe: Any, ok: Any, timeout_s: float = PROCESS_S) -> Any:
    last: list[Any] = [None]

    def read() -> Any:
        last[0] = probe.read().devices[0]
        return last[0] if ok(last[0]) else None

    return wait_until(read, deadline_s=timeout_s, what=lambda: f"a reading; last: {last[0]}")
