"""The supervisor against the simulated machine's fake vLLM server (real processes): the
budget reaches the server, every process and every simulated byte is accounted for."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from sim_helpers import gone, sim_profile

from tests.support import http
from vramtop.core.model import ServerState
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.machines.demo_world import memory_released_check
from vramtop.sim.machine import SimMachine
from vramtop.supervisor import Supervisor, state


@pytest.fixture
def machine(home: Path) -> Iterator[SimMachine]:
    with SimMachine(home / "sim", speed=20.0, startup_s=0.2) as sim:
        yield sim


def servers_on(machine: SimMachine) -> list[dict[str, object]]:
    return list(machine.state()["servers"])


def cache_util(url: str) -> str:
    text = http.get(f"{url}/metrics", timeout=2).text
    line = next(x for x in text.splitlines() if x.startswith("vllm:cache_config_info{"))
    return line.split('gpu_memory_utilization="')[1].split('"')[0]


def test_start_ready_restart_relaunch_stop_on_the_simulated_gpu(machine: SimMachine) -> None:
    sup = Supervisor(sim_profile(machine, "sim"), memory_released=memory_released_check(machine))
    assert sup.start().ok
    first = sup.status()
    assert first.state == ServerState.RUNNING
    engine_pids = {int(s["pid"]) for s in servers_on(machine)}  # type: ignore[call-overload]
    assert engine_pids and engine_pids <= set(first.pids)  # the engine is in the tree

    assert sup.restart().ok
    second = sup.status()
    assert gone(first.pids) and second.pid != first.pid
    assert len(servers_on(machine)) == 1

    # The field report's fix, both flags: 262,144 tokens no longer fit at 0.85.
    assert sup.relaunch(RelaunchOrder(FlagChange(0.85, max_model_len=163_840))).ok
    third = sup.status()
    assert gone(second.pids)
    assert cache_util(sup.profile.url) == "0.85"
    assert third.budget == 0.85

    assert sup.stop().ok
    assert gone(third.pids)
    assert servers_on(machine) == []
    assert sup.status().state == ServerState.STOPPED


def test_a_budget_with_no_room_reports_the_cause_and_the_largest_that_fits(
    machine: SimMachine,
) -> None:
    device = machine.state()["device"]
    fits = math.floor(device["free_bytes"] / device["total_bytes"] * 100) / 100
    sup = Supervisor(sim_profile(machine, "nofit", util=0.99))
    result = sup.start()
    assert not result.ok
    assert "out of memory" in result.message
    rec = state.load("nofit")
    assert rec is not None and rec.error_kind == "out_of_memory"
    assert rec.largest_fitting_budget is not None
    # From the GiB vLLM prints (2 decimals), measured after its CUDA context took its share:
    # at most a little under what the device shows free before the start.
    assert fits - 0.02 <= rec.largest_fitting_budget <= fits
    assert f"largest budget that fits now is {rec.largest_fitting_budget:.2f}" in result.message
    fits = rec.largest_fitting_budget
    assert servers_on(machine) == []
    # The advice is right: that budget starts.
    assert sup.relaunch(RelaunchOrder(FlagChange(fits))).ok, "the suggested budget did not fit"
    assert sup.stop().ok
