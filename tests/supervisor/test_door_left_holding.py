"""A relaunch killed (`kill -9`) during its start leaves nobody to release the front door:
the next housekeeping (any command, a console tick) answers what it holds at once, naming
why, instead of leaving it held until the hold's limit (600 s)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sim_helpers import door_report, sim_profile

from tests.support import http
from tests.support.waiting import wait_until
from vramtop import profiles
from vramtop.machines.demo_world import memory_released_check
from vramtop.sim.machine import SimMachine
from vramtop.supervisor import Supervisor, door, state
from vramtop.supervisor.state import Lifecycle


@pytest.fixture
def machine(home: Path) -> Iterator[SimMachine]:
    with SimMachine(home / "sim", speed=20.0, startup_s=0.5) as sim:
        yield sim


def wait_for(check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    wait_until(check, deadline_s=timeout_s, what="the check (see the line above)")


@pytest.mark.slow
def test_a_relaunch_killed_during_its_start_leaves_no_request_held(
    machine: SimMachine, home: Path
) -> None:
    base = sim_profile(machine, "held")
    profile = base.model_copy(update={"front_door": f"127.0.0.1:{base.port}", "drain_s": 5.0})
    profiles.save_profile(profile)
    sup = Supervisor(profile, memory_released=memory_released_check(machine))
    assert sup.start().ok
    first = state.load("held")
    assert first is not None

    # The relaunch's server loads for long (its profile says so): it is killed mid-start.
    slow = profile.model_copy(update={"env": {**profile.env, "VRAMTOP_SIM_STARTUP_S": "600"}})
    profiles.save_profile(slow, overwrite=True)
    asked_for = ["relaunch", "--profile", "held", "--budget", "0.80", "--no-check", "-q"]
    relaunch = subprocess.Popen(
        [sys.executable, "-m", "vramtop", *asked_for],
        env={**os.environ, "VRAMTOP_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def starting() -> bool:
        rec = state.load("held")
        return (
            rec is not None
            and rec.launch_id != first.launch_id
            and rec.state == Lifecycle.STARTING
            and rec.actor_pid == relaunch.pid
        )

    try:
        wait_for(starting)
        relaunch.send_signal(signal.SIGKILL)
        relaunch.wait()
        rec = state.load("held")
        assert rec is not None and rec.pid is not None
        os.killpg(rec.pid, signal.SIGKILL)  # its server, left alone, crashed
        assert door_report(rec).get("holding") is True

        answers: list[httpx.Response] = []
        asked = threading.Thread(
            target=lambda: answers.append(http.get(f"{sup.agent_url}/v1/models", timeout=120))
        )
        asked.start()
        wait_for(lambda: door_report(rec).get("held") == 1)
        fresh = Supervisor(slow, memory_released=memory_released_check(machine))
        # Its look at the door (1 s) may time out on a busy machine: it looks at its next pass.
        wait_for(lambda: (fresh.housekeeping(), door_report(rec).get("holding"))[1] is False)
        asked.join(60)  # the hold's own limit is 600 s: only housekeeping answers it sooner
        assert answers, "the held request was not answered"
        assert answers[0].status_code == 503
        error = answers[0].json()["error"]
        assert "no start is under way" in error["message"]
        assert "no start is under way" in str(fresh.record_note)
        assert door_report(rec).get("holding") is False
    finally:
        if relaunch.poll() is None:
            relaunch.kill()
            relaunch.wait()
        sup.stop()


@pytest.mark.slow
def test_the_demos_door_left_holding_after_its_world_went_is_answered_by_status(
    home: Path,
) -> None:
    """`status --demo` once the demo's world has gone (it idles out after its servers die)
    still settles the door the record names: it said "stopped" and left the request held."""
    from tests.support.ports import free_port
    from vramtop.machines import demo_world

    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "VRAMTOP_HOME": str(home)}

    def vramtop(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "vramtop", "--front-door", address, *argv]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    assert vramtop("start", "--demo").returncode == 0
    rec = state.load(demo_world.DEMO_PROFILE)
    assert rec is not None and door.alive(rec)
    # As a relaunch killed during its start leaves it: the door holds, nobody will release it,
    # and the world has gone with the server.
    assert door.hold(rec, 0.0) is not None
    assert rec.pid is not None
    os.killpg(rec.pid, signal.SIGKILL)
    machine = demo_world.demo_machine()
    machine.client.request("shutdown")  # as it does once idle (its door is no client of it)
    wait_for(lambda: not demo_world.world_alive(machine))

    answers: list[httpx.Response] = []
    url = f"http://{address}/v1/models"
    asked = threading.Thread(target=lambda: answers.append(http.get(url, timeout=120)))
    asked.start()
    try:
        wait_for(lambda: door_report(rec).get("held") == 1)
        said = vramtop("status", "--demo")
        asked.join(60)  # the hold's own limit is 600 s: only housekeeping answers it sooner
        assert answers, f"the held request was not answered; status said {said.stdout!r}"
        assert answers[0].status_code == 503
        assert "no start is under way" in answers[0].json()["error"]["message"]
        assert "no start is under way" in said.stdout
    finally:
        vramtop("stop", "--demo", "--all")
        asked.join(5)
