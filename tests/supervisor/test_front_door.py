"""The front door on the simulated machine (real processes: the door, the fake vLLM, a
streaming agent): restarts and relaunches under load fail no request, a door killed with
SIGKILL is started again at the next housekeeping step, and a stop ends both."""

from __future__ import annotations

import json
import os
import signal
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from sim_helpers import door_report, gone, sim_profile

from tests.support import http
from tests.support.ports import free_port
from tests.support.waiting import wait_until
from vramtop.config import Profile
from vramtop.core.model import ServerState
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.event_log import EventLog
from vramtop.machines.demo_world import memory_released_check
from vramtop.machines.live_machine import live_machine
from vramtop.sim.load import LoadGenerator
from vramtop.sim.machine import SimMachine
from vramtop.supervisor import Supervisor, door, launch, state


@pytest.fixture
def machine(home: Path) -> Iterator[SimMachine]:
    with SimMachine(home / "sim", speed=20.0, startup_s=0.5) as sim:
        yield sim


def door_profile(machine: SimMachine, name: str) -> Profile:
    base = sim_profile(machine, name)
    return base.model_copy(update={"front_door": f"127.0.0.1:{base.port}", "drain_s": 30.0})


def wait_for(check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    wait_until(check, deadline_s=timeout_s, what="the check (see the line above)")


def record(name: str) -> state.ServerRecord:
    rec = state.load(name)
    assert rec is not None
    return rec


def finish(gen: LoadGenerator, more: int = 3) -> None:
    """Let each stream end its request and stop: a stop mid-stream would cut one short."""
    gen.max_requests = gen.completed + more
    wait_for(lambda: not any(t.is_alive() for t in gen._threads if t.name != "load-phases"))
    gen.stop()


@pytest.mark.slow
def test_restart_and_relaunch_under_load_fail_no_request(machine: SimMachine) -> None:
    profile = door_profile(machine, "door")
    sup = Supervisor(profile, memory_released=memory_released_check(machine))
    assert sup.start().ok
    rec = record("door")
    assert rec.front_door == profile.front_door and door.alive(rec)
    # vLLM behind the door on a loopback port of its own; the profile keeps its port.
    assert rec.internal_port not in (None, profile.port) and rec.port == rec.internal_port
    assert f"--port {rec.internal_port}" in " ".join(rec.argv)
    assert sup.profile.port == profile.port and sup.agent_url == profile.url
    assert sup.scrape_url == f"http://127.0.0.1:{rec.internal_port}"
    assert http.get(f"{sup.scrape_url}/health", timeout=2).status_code == 200
    # The console reads vLLM behind the door, not through it.
    assert live_machine(profile, None, None).sampler.url == sup.scrape_url

    gen = LoadGenerator(sup.agent_url, concurrency=3, pause_s=(0.0, 0.1)).start()
    wait_for(lambda: gen.completed >= 3)
    first = sup.status()
    assert sup.restart().ok
    assert gone(first.pids)
    done = gen.completed
    wait_for(lambda: gen.completed >= done + 3)
    # A relaunch vLLM refuses (262,144 tokens do not fit at 0.85) rolls back: what was held
    # meanwhile goes to the rolled-back server.
    failed = sup.relaunch(RelaunchOrder(FlagChange(0.85)))
    assert not failed.ok and failed.rolled_back
    done = gen.completed
    wait_for(lambda: gen.completed >= done + 3)
    second = sup.status()
    assert sup.relaunch(RelaunchOrder(FlagChange(0.85, max_model_len=163_840))).ok
    assert gone(second.pids)
    done = gen.completed
    wait_for(lambda: gen.completed >= done + 3)
    finish(gen)

    report = door_report(record("door"))
    assert gen.errors == 0, f"{gen.errors} requests failed through the door"
    assert report["failed"] == 0 and report["held"] == 0
    # Requests arrived while no server served: they were held, and every one was answered.
    assert report["held_total"] >= 1 and report["longest_hold_s"] > 0
    assert report["served"] >= gen.completed
    print(f"longest hold {report['longest_hold_s']:.2f} s, {report['held_total']} held")
    # The same door throughout: restarts and relaunches keep it.
    assert record("door").door_pid == rec.door_pid and record("door").door_restarts == 0

    assert sup.stop().ok
    assert not door.alive(rec) and record("door").door_pid is None
    assert launch.port_owner("127.0.0.1", profile.port) is None


@pytest.mark.slow
def test_a_door_killed_is_started_again_and_serves(machine: SimMachine) -> None:
    profile = door_profile(machine, "kill")
    sup = Supervisor(profile, memory_released=memory_released_check(machine))
    assert sup.start().ok
    assert sup.door_restarts_since() == 0
    rec = record("kill")
    assert rec.door_pid is not None
    token = door.token_path("kill")
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    os.kill(rec.door_pid, signal.SIGKILL)
    wait_for(lambda: not door.alive(rec), 5.0)
    # The console's tick asks `settling` every second: a dead door is a step to take.
    assert sup.settling() is not None
    sup.housekeeping()
    again = record("kill")
    assert again.door_pid not in (None, rec.door_pid) and door.alive(again)
    assert again.door_restarts == 1 and sup.door_restarts_since() == 1
    assert sup.door_restarts_since() == 0  # told once
    # A console opened later counts from its own start.
    assert Supervisor(profile).door_restarts_since() == 0
    assert sup.settling() is None
    assert sup.status().state == ServerState.RUNNING
    # The agent's next request is served, through the new door, by the same server.
    gen = LoadGenerator(sup.agent_url, concurrency=1, max_requests=2).start()
    gen.wait()
    assert gen.completed == 2 and gen.errors == 0
    assert psutil.pid_exists(again.door_pid or 0)
    # Killed again just before a restart (no housekeeping step between): the restart starts
    # it again itself, and counts it.
    os.kill(again.door_pid or 0, signal.SIGKILL)
    wait_for(lambda: not door.alive(again), 5.0)
    assert sup.restart().ok
    third = record("kill")
    assert door.alive(third) and third.door_restarts == 2 and sup.door_restarts_since() == 1
    assert sup.stop().ok
    assert not door.alive(third)


def test_a_start_whose_door_port_is_taken_starts_nothing(machine: SimMachine) -> None:
    import socket

    profile = door_profile(machine, "taken").model_copy(
        update={"front_door": f"127.0.0.1:{free_port()}"}
    )
    assert profile.front_door is not None
    port = int(profile.front_door.rsplit(":", 1)[1])
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()
        result = Supervisor(profile).start()
    assert not result.ok
    assert f"the front door's port {port} is already in use" in result.message
    rec = state.load("taken")
    assert rec is None or rec.state != state.Lifecycle.RUNNING


@pytest.mark.slow
def test_a_crash_with_auto_restart_holds_what_arrives_until_the_server_is_back(
    machine: SimMachine,
) -> None:
    profile = door_profile(machine, "auto").model_copy(update={"auto_restart": True})
    sup = Supervisor(profile, memory_released=memory_released_check(machine))
    assert sup.start().ok
    rec = record("auto")
    assert rec.pid is not None
    os.kill(rec.pid, signal.SIGKILL)  # vLLM dies nobody asked
    wait_for(lambda: (sup.housekeeping(), record("auto").state)[1] == state.Lifecycle.CRASHED)
    assert door_report(rec).get("holding") is True  # the automatic restart is due
    gen = LoadGenerator(sup.agent_url, concurrency=1, max_requests=1).start()
    wait_for(lambda: door_report(rec).get("held") == 1)
    wait_for(lambda: (sup.housekeeping(), record("auto").state)[1] == state.Lifecycle.RUNNING)
    gen.wait()
    assert gen.completed == 1 and gen.errors == 0  # held, then served by the new server
    assert record("auto").pid != rec.pid
    assert sup.stop().ok


@pytest.mark.slow
def test_a_hold_left_by_a_vramtop_killed_mid_restart_is_released(machine: SimMachine) -> None:
    sup = Supervisor(door_profile(machine, "left"), memory_released=memory_released_check(machine))
    assert sup.start().ok
    rec = record("left")
    assert door.hold(rec, 0.0) is not None  # as a restart does before it stops the server
    assert door_report(rec).get("holding") is True
    with state.locked("left"):  # an action under way: its hold is its own
        sup.housekeeping()
        assert door_report(rec).get("holding") is True
    # Nobody acts, the server serves: the hold was left behind, and housekeeping releases it
    # (its look at the door, 1 s, may time out on a busy machine: it looks at its next pass).
    wait_for(lambda: (sup.housekeeping(), door_report(rec).get("holding"))[1] is False)
    gen = LoadGenerator(sup.agent_url, concurrency=1, max_requests=1).start()
    gen.wait()
    assert gen.completed == 1 and gen.errors == 0
    assert sup.stop().ok


def test_a_lost_state_file_is_rebuilt_with_its_door(machine: SimMachine) -> None:
    sup = Supervisor(door_profile(machine, "lost"), memory_released=memory_released_check(machine))
    assert sup.start().ok
    rec = record("lost")
    state.state_path("lost").unlink()
    fresh = Supervisor(sup.profile, memory_released=memory_released_check(machine))
    assert fresh.housekeeping().state == ServerState.RUNNING
    rebuilt = record("lost")
    assert "rebuilt from the running server" in (fresh.record_note or "")
    assert (rebuilt.pid, rebuilt.internal_port) == (rec.pid, rec.internal_port)
    assert (rebuilt.door_pid, rebuilt.front_door) == (rec.door_pid, rec.front_door)
    assert fresh.owns_its_port()
    assert fresh.stop().ok
    assert not door.alive(rec)  # the stop found the door again, and ended it


def test_a_start_refused_for_its_key_opens_no_door(
    machine: SimMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("H4B_NO_SUCH_KEY", raising=False)
    profile = door_profile(machine, "nokey").model_copy(update={"api_key_env": "H4B_NO_SUCH_KEY"})
    result = Supervisor(profile).start()
    assert not result.ok and "H4B_NO_SUCH_KEY" in result.message
    assert launch.port_owner("127.0.0.1", profile.port) is None  # no door left on its port


def test_a_restart_whose_start_breaks_fails_what_the_door_holds_at_once(
    machine: SimMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error of vramtop's own after the stop (not vLLM refusing) ends the restart as a
    failed one: the request held at the door gets its 503 now, not after the hold's 600 s."""
    from vramtop.supervisor.actions import ServerActions

    sup = Supervisor(door_profile(machine, "broke"), memory_released=memory_released_check(machine))
    assert sup.start().ok
    rec = record("broke")

    def broken(*args: object, **kwargs: object) -> object:
        # A request arrives once the door holds and the server is gone, then the start breaks.
        held.start()
        wait_for(lambda: door_report(rec).get("held") == 1)
        raise OSError("no file descriptors left")

    monkeypatch.setattr(ServerActions, "start_locked", broken)
    answers: list[httpx.Response] = []

    import threading

    def ask() -> None:
        answers.append(http.get(f"{sup.agent_url}/v1/models", timeout=60))

    held = threading.Thread(target=ask)
    assert not sup.restart().ok
    held.join(30)
    assert answers and answers[0].status_code == 503
    assert "did not start again" in answers[0].text
    assert "no file descriptors left" in answers[0].text
    monkeypatch.undo()
    door.stop(rec)  # the record went with the failed start; the door is still its own


def test_a_damaged_token_file_is_never_replaced_under_a_running_door(machine: SimMachine) -> None:
    """The door keeps the token it read at its start: a control call with the file unreadable
    asks nothing (and writes no new token, which would lock the supervisor out of it for
    good); once the file is whole again, the door answers its supervisor."""
    sup = Supervisor(door_profile(machine, "tok"), memory_released=memory_released_check(machine))
    assert sup.start().ok
    rec = record("tok")
    path = door.token_path("tok")
    whole = path.read_bytes()
    path.write_bytes(b"short\n")
    assert door.hold(rec, 0.0) is None
    assert path.read_bytes() == b"short\n"
    path.write_bytes(whole)
    assert door.hold(rec, 0.0) is not None and door_report(rec).get("holding") is True
    assert door.release(rec) is not None
    assert sup.stop().ok


def test_a_door_started_before_its_server_serves_holds_what_arrives_at_once(
    machine: SimMachine,
) -> None:
    # Started for a launch, the door holds from its first request: started forwarding (and
    # told to hold once it answered), the agent's requests in between reached a server still
    # loading and failed.
    import threading

    address = f"127.0.0.1:{free_port()}"
    spawned = door.spawn("early", address, None, 600.0)
    assert not isinstance(spawned, str), spawned
    pid, made = spawned
    rec = state.ServerRecord(
        profile="early", front_door=address, door_pid=pid, door_create_time=made
    )
    try:
        assert door_report(rec).get("holding") is True
        answers: list[int] = []
        asking = threading.Thread(
            target=lambda: answers.append(
                http.get(f"http://{address}/v1/models", timeout=60).status_code
            )
        )
        asking.start()
        wait_for(lambda: door_report(rec).get("held") == 1)
        assert answers == [] and door_report(rec).get("failed") == 0
        assert door.fail(rec, "the server did not start")  # the held request's answer: a 503
        asking.join(30)
        assert answers == [503]
    finally:
        door.stop(rec)


def test_a_restart_with_a_token_file_others_can_write_stops_nothing(machine: SimMachine) -> None:
    """The door could not be asked to hold with that token (vramtop sends no token another
    user could have written): the server would be stopped with nobody holding what arrives.
    The restart and the relaunch are refused before the stop, naming the file and the fix."""
    sup = Supervisor(door_profile(machine, "loose"), memory_released=memory_released_check(machine))
    assert sup.start().ok
    rec = record("loose")
    path = door.token_path("loose")
    path.chmod(0o666)
    for result in (sup.restart(), sup.relaunch(RelaunchOrder(FlagChange(0.8)))):
        assert not result.ok
        assert f"`chmod go-w {path}`" in result.message and "nothing was stopped" in result.message
    assert record("loose").pid == rec.pid and sup.owns_its_port()
    assert door_report(rec).get("holding") is False
    path.chmod(0o600)
    assert sup.stop().ok


@pytest.mark.slow
def test_a_restart_sends_a_request_not_answered_yet_again_and_its_event_says_so(
    home: Path,
) -> None:
    # At the simulated machine's own pace: a 2,000-token answer takes it about 25 s.
    with SimMachine(home / "sim-slow", speed=1.0, startup_s=0.5) as slow:
        profile = door_profile(slow, "replay")
        sup = Supervisor(profile, memory_released=memory_released_check(slow))
        assert sup.start().ok
        answers: list[httpx.Response] = []
        body = {"prompt": "write at length", "max_tokens": 2000}
        agent = threading.Thread(
            target=lambda: answers.append(
                http.post(f"{sup.agent_url}/v1/completions", json=body, timeout=170)
            ),
            daemon=True,
        )
        agent.start()
        rec = record("replay")
        wait_for(lambda: door_report(rec).get("in_flight") == 1)
        assert sup.restart().ok
        agent.join(170)
        assert answers and answers[0].status_code == 200
        assert json.loads(answers[0].content)["usage"]["completion_tokens"] == 2000
        restarts = [e for e in EventLog.for_profile("replay").read() if e.name == "restart"]
        assert restarts[-1].detail["replayed"] == 1
        assert restarts[-1].detail["drain_took_s"] >= 0
        # The new start's phases, from the simulated vLLM's log.
        phases = restarts[-1].detail["phases"]
        assert phases["weights_gib"] > 0 and phases["to_ready_s"] >= 0
        assert door_report(record("replay")).get("failed") == 0
        assert sup.stop().ok
