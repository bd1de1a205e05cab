"""A stop from another vramtop while the server is still loading (real processes on the
simulated machine, with a load of a few seconds): the stop does not wait for the load, ends
every process, frees the simulated GPU, and the waiting start says it was stopped, not that
the server crashed. A second start during the load still never launches a second server."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sim_helpers import gone, sim_api_servers, sim_profile

from tests.support.waiting import PROCESS_S, wait_until
from vramtop.core.model import ServerState
from vramtop.machines.demo_world import memory_released_check
from vramtop.outcomes import ActionResult
from vramtop.sim.machine import SimMachine
from vramtop.supervisor import Supervisor, state
from vramtop.supervisor.state import ServerRecord

# Long enough that every check below happens while the server is still loading.
LOAD_S = 6.0
# Generous bounds: they only tell "returned" from "wedged for minutes" (the lock is held
# for up to 120 s by the old behaviour).
RETURNS_WITHIN_S = 30.0


@pytest.fixture
def machine(home: Path) -> Iterator[SimMachine]:
    with SimMachine(home / "sim", speed=20.0, startup_s=LOAD_S) as sim:
        yield sim


def in_background(call: Callable[[], ActionResult]) -> tuple[threading.Thread, list[ActionResult]]:
    results: list[ActionResult] = []
    thread = threading.Thread(target=lambda: results.append(call()), daemon=True)
    thread.start()
    return thread, results


def wait_until_loading(name: str, machine: SimMachine) -> ServerRecord:
    """Until the server runs and its engine holds simulated memory, but is not ready."""

    def loading() -> ServerRecord | None:
        rec = state.load(name)
        loads = rec is not None and rec.state == "starting" and machine.state()["servers"]
        return rec if loads else None

    return wait_until(
        loading, deadline_s=PROCESS_S, what=lambda: f"the server loading; last: {state.load(name)}"
    )


def test_a_stop_from_another_vramtop_ends_a_load_under_way(machine: SimMachine) -> None:
    profile = sim_profile(machine, "slow")
    check = memory_released_check(machine)
    starter = Supervisor(profile, memory_released=check)
    words: list[str] = []
    start_thread, started = in_background(lambda: starter.start(progress=words.append))
    try:
        loading = wait_until_loading("slow", machine)
        pids = {int(p) for p in loading.tree} | {int(s["pid"]) for s in machine.state()["servers"]}
        assert loading.pid in pids

        stop_thread, stopped = in_background(
            lambda: Supervisor(profile, memory_released=check).stop()
        )
        stop_thread.join(RETURNS_WITHIN_S)
        assert not stop_thread.is_alive(), "the stop waited for the load"
        assert stopped[0].ok and stopped[0].message == "stopped", stopped[0]

        start_thread.join(RETURNS_WITHIN_S)
        assert not start_thread.is_alive(), "the start kept waiting after the stop"
    finally:
        Supervisor(profile, memory_released=check).stop()
        start_thread.join(RETURNS_WITHIN_S)
    result = started[0]
    assert not result.ok
    assert result.message.startswith("stopped while loading"), result
    assert words[-1] == "stopped" and "failed" not in words and "ready" not in words
    assert gone(pids)
    assert sim_api_servers(machine) == []
    assert machine.state()["servers"] == []  # the simulated GPU holds nothing
    rec = state.load("slow")
    assert rec is not None and rec.state == "stopped"
    assert rec.last_error is None and rec.error_kind is None  # not a crash finding
    assert Supervisor(profile).status().state == ServerState.STOPPED


@pytest.mark.slow
def test_a_second_start_during_the_load_waits_for_it_and_launches_nothing(
    machine: SimMachine,
) -> None:
    profile = sim_profile(machine, "once")
    check = memory_released_check(machine)
    first = Supervisor(profile, memory_released=check)
    start_thread, started = in_background(first.start)
    try:
        loading = wait_until_loading("once", machine)
        second = Supervisor(profile, memory_released=check).start()
        start_thread.join(RETURNS_WITHIN_S)
        assert second.ok and second.message.startswith("ready"), second
        assert started[0].ok, started[0]
        servers = sim_api_servers(machine)
        assert [p.pid for p in servers] == [loading.pid]  # one server: the first one
        assert len(machine.state()["servers"]) == 1
        rec = state.load("once")
        assert rec is not None and rec.state == "running" and rec.pid == loading.pid
    finally:
        assert Supervisor(profile, memory_released=check).stop().ok
        start_thread.join(RETURNS_WITHIN_S)
    assert machine.state()["servers"] == []


def test_a_restart_from_another_vramtop_during_the_load_replaces_it(
    machine: SimMachine,
) -> None:
    profile = sim_profile(machine, "again")
    check = memory_released_check(machine)
    start_thread, started = in_background(Supervisor(profile, memory_released=check).start)
    try:
        loading = wait_until_loading("again", machine)
        restarted = Supervisor(profile, memory_released=check).restart(wait_ready=False)
        assert restarted.ok, restarted
        start_thread.join(RETURNS_WITHIN_S)
        assert not start_thread.is_alive()
        # Seen during the restart's stop, or after its launch: either way, not a crash.
        message = started[0].message
        assert message.startswith(("replaced while loading", "stopped while loading")), message
        assert "another vramtop" in message and not started[0].ok
        rec = state.load("again")
        assert rec is not None and rec.pid != loading.pid and rec.state == "starting"
        assert [p.pid for p in sim_api_servers(machine)] == [rec.pid]
    finally:
        assert Supervisor(profile, memory_released=check).stop().ok
        start_thread.join(RETURNS_WITHIN_S)
    assert sim_api_servers(machine) == []
    assert machine.state()["servers"] == []


@pytest.mark.slow
def test_vramtop_stop_ends_a_vramtop_start_that_is_still_loading(home: Path) -> None:
    """The user's case, as commands in two terminals on the demo's simulated machine."""
    # A load far longer than any test waits: the stop, a process of its own that may take
    # seconds to start on a busy machine, always finds the server still loading (with a 6 s
    # load, one run at load average 12 found it ready and the start ended with exit 0).
    env = {**os.environ, "VRAMTOP_SIM_STARTUP_S": "600", "VRAMTOP_SIM_SPEED": "20"}
    vramtop = [sys.executable, "-m", "vramtop"]
    start = subprocess.Popen(
        [*vramtop, "start", "--demo"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(
            lambda: (rec := state.load("demo")) is not None and rec.state == "starting",
            deadline_s=60,
            what=lambda: f"the demo server loading; last: {state.load('demo')}",
        )
        stop = subprocess.run(
            [*vramtop, "stop", "--demo", "-q"],
            env=env,
            capture_output=True,
            text=True,
            timeout=RETURNS_WITHIN_S,
        )
        assert stop.returncode == 0, stop.stderr
        assert stop.stdout.strip() == "stopped"
        _, err = start.communicate(timeout=RETURNS_WITHIN_S)
        assert start.returncode == 2
        assert "vramtop: stopped while loading" in err
        assert "Traceback" not in err
    finally:
        if start.poll() is None:
            start.kill()
            start.wait()
        subprocess.run([*vramtop, "stop", "--demo", "--all", "-q"], env=env, timeout=60)
    rec = state.load("demo")
    assert rec is not None and rec.state == "stopped" and rec.error_kind is None
