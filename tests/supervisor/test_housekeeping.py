"""Housekeeping: a record whose acting vramtop is gone settles to the truth (the live process
tree and /health) within a few steps; `status()` alone only reads."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sim_helpers import sim_api_servers, sim_profile

from tests.support.waiting import PROCESS_S, wait_until
from vramtop import profiles
from vramtop.config import Profile
from vramtop.core.model import ServerInfo, ServerState
from vramtop.core.step_report import step_lines
from vramtop.event_log import EventLog
from vramtop.machines.demo_world import memory_released_check
from vramtop.sim.machine import SimMachine
from vramtop.supervisor import Supervisor, state
from vramtop.supervisor.step_phases import recorded_last_step, recorded_last_total

LOAD_S = 4.0


@pytest.fixture
def machine(home: Path) -> Iterator[SimMachine]:
    with SimMachine(home / "sim", speed=20.0, startup_s=LOAD_S) as sim:
        yield sim


def settle(sup: Supervisor, wanted: ServerState, timeout_s: float = PROCESS_S) -> ServerInfo:
    """The first housekeeping step that finds `wanted`; at `timeout_s`, the last one."""
    infos = [sup.housekeeping()]

    def settled() -> bool:
        infos.append(sup.housekeeping())
        return infos[-1].state == wanted

    if infos[0].state != wanted:
        with contextlib.suppress(AssertionError):  # the caller asserts the state it wanted
            wait_until(settled, deadline_s=timeout_s, what=wanted.value, poll_s=0.2)
    return infos[-1]


def _start_then_interrupt(profile: Profile, how: signal.Signals, action: str = "start") -> None:
    profiles.save_profile(profile)
    cli = subprocess.Popen(
        [sys.executable, "-m", "vramtop", action, "--profile", profile.name, "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Ctrl+C's default action even when the tests run where SIGINT is ignored (a shell's
        # background job): an ignored SIGINT is inherited, and the start would never see it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    with contextlib.suppress(AssertionError):  # signalled anyway, as before it loads
        wait_until(
            lambda: (
                (rec := state.load(profile.name)) is not None
                and rec.state == "starting"
                and rec.pid
            ),
            deadline_s=20,
            what="the server loading",
        )
    cli.send_signal(how)
    cli.wait(timeout=20)


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL])
def test_a_start_interrupted_while_loading_settles_to_running(
    machine: SimMachine, how: signal.Signals
) -> None:
    profile = sim_profile(machine, "cut")
    _start_then_interrupt(profile, how)
    sup = Supervisor(profile, memory_released=memory_released_check(machine))
    try:
        assert sup.status().state == ServerState.STARTING  # nobody follows the load now
        info = settle(sup, ServerState.RUNNING)
        assert info.state == ServerState.RUNNING and info.phase == "ready"
        assert len(sim_api_servers(machine)) == 1
        rec = state.load("cut")
        assert rec is not None and rec.state == "running" and rec.actor_pid is None
        # The timeline says the start was interrupted, and what came of it, once.
        (told,) = [e for e in EventLog.for_profile("cut").read() if e.name == "start"]
        assert told.detail["result"] == "interrupted" and told.detail["asked_by"] == "command"
        assert f"ready without it (pid {rec.pid})" in str(told.detail["message"])
        sup.housekeeping()
        assert [e.name for e in EventLog.for_profile("cut").read()] == ["start"]
    finally:
        assert sup.stop().ok


@pytest.mark.slow
def test_a_restart_killed_while_loading_is_told_as_interrupted(machine: SimMachine) -> None:
    profile = sim_profile(machine, "rk")
    sup = Supervisor(profile, memory_released=memory_released_check(machine))
    assert sup.start().ok
    first = state.load("rk")
    try:
        _start_then_interrupt(profile, signal.SIGKILL, action="restart")
        rec = state.load("rk")
        assert first is not None and rec is not None and rec.pid != first.pid  # it relaunched
        assert settle(sup, ServerState.RUNNING).state == ServerState.RUNNING
        told = [e for e in EventLog.for_profile("rk").read() if e.name == "restart"]
        assert [e.detail["result"] for e in told] == ["interrupted"]
        assert "vLLM became ready without it" in str(told[0].detail["message"])
        # It is the last step `status` gives, not the start before it, with the phases the
        # new server's log told (vramtop's own timer died with the restart's vramtop).
        step = recorded_last_step("rk")
        assert step is not None
        assert (step["action"], step["result"]) == ("restart", "interrupted")
        assert "weights_s" in step["phases"] and "total_s" not in step["phases"]  # type: ignore[operator]
        head, said = step_lines(step)[:2]
        assert head.startswith("last restart, interrupted (vLLM: weights ")
        assert "ended half-way; vLLM became ready without it" in said
        # The next step's expected time is still the last timed one's: the start's.
        assert recorded_last_total("rk") == last_step_total_of_start("rk")
    finally:
        assert sup.stop().ok


def last_step_total_of_start(profile: str) -> float:
    (start,) = [e for e in EventLog.for_profile(profile).read() if e.name == "start"]
    phases = start.detail["phases"]
    assert isinstance(phases, dict) and isinstance(phases["total_s"], float)
    return phases["total_s"]


@pytest.mark.slow
def test_status_only_reads_and_housekeeping_notices_a_crash(machine: SimMachine) -> None:
    sup = Supervisor(sim_profile(machine, "c"), memory_released=memory_released_check(machine))
    assert sup.start().ok
    (server,) = sim_api_servers(machine)
    server.kill()
    server.wait(5)
    before = state.state_path("c").read_text()
    assert sup.status().state == ServerState.RUNNING
    assert state.state_path("c").read_text() == before  # reading wrote nothing
    assert settle(sup, ServerState.CRASHED).state == ServerState.CRASHED


@pytest.mark.slow
def test_a_stop_whose_vramtop_died_before_it_acted_settles_to_running(
    machine: SimMachine,
) -> None:
    sup = Supervisor(sim_profile(machine, "s"), memory_released=memory_released_check(machine))
    assert sup.start().ok
    try:
        rec = state.load("s")
        assert rec is not None
        rec.state, rec.stop_requested = "stopping", True  # then the vramtop was killed
        rec.acting, rec.acting_asked_by = "stop", "key"
        state.save(rec)
        assert sup.status().state == ServerState.STOPPING
        assert settle(sup, ServerState.RUNNING).state == ServerState.RUNNING
        (told,) = [e for e in EventLog.for_profile("s").read() if e.name == "stop"]
        assert (told.detail["result"], told.detail["asked_by"]) == ("interrupted", "key")
        assert "vLLM still serves" in str(told.detail["message"])
    finally:
        assert sup.stop().ok


@pytest.mark.slow
def test_a_hung_server_is_running_but_not_healthy_in_status(
    machine: SimMachine, capsys: pytest.CaptureFixture[str]
) -> None:
    from vramtop import cli

    profile = sim_profile(machine, "hung")
    profiles.save_profile(profile)
    sup = Supervisor(profile, memory_released=memory_released_check(machine))
    assert sup.start().ok
    (server,) = sim_api_servers(machine)
    try:
        server.suspend()  # SIGSTOP: the port is held, nothing answers
        assert cli.main(["status", "--profile", "hung", "--json"]) == 0
        hung = json.loads(capsys.readouterr().out)
        assert hung["state"] == "running" and hung["healthy"] is False
        assert "did not answer" in hung["reason"]
        server.resume()
        assert cli.main(["status", "--profile", "hung", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["healthy"] is True
    finally:
        server.resume()
        assert sup.stop().ok
