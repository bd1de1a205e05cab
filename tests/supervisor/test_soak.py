"""A randomized soak on the simulated machine: start, stop, restart, relaunch, SIGKILL of the API
server, SIGKILL of a supervising vramtop mid-action, and re-attach from a fresh Supervisor.

After every operation: never two servers. At the end: no process left, no simulated memory
held, and the log holds the output of every server that ran (never truncated).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from sim_helpers import sim_api_servers, sim_profile

from tests.support import http
from tests.support.waiting import PROCESS_S, wait_until
from vramtop import locations, profile_file
from vramtop.core.model import ServerInfo, ServerState
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.machines.demo_world import memory_released_check
from vramtop.sim.machine import SimMachine
from vramtop.supervisor import Supervisor, state

OPS = int(os.environ.get("VRAMTOP_SOAK_OPS", "200"))
SEED = int(os.environ.get("VRAMTOP_SOAK_SEED", "1"))


@pytest.fixture
def machine(home: Path) -> Iterator[SimMachine]:
    with SimMachine(home / "sim", speed=20.0, startup_s=0.2) as sim:
        yield sim


def sim_processes(socket_path: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.status() == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
                continue
            env = proc.environ()
            if env.get("VRAMTOP_SIM_SOCKET") == socket_path:
                found.append(proc)
    return found


def converge(sup: Supervisor, machine: SimMachine, deadline_s: float = PROCESS_S) -> ServerInfo:
    """Housekeeping steps until the record says what is there: running when the server
    answers /health, stopped or crashed when there is no server, starting only while one
    loads. Fails, naming the last record, when it never did within `deadline_s`."""
    seen: list[ServerInfo] = []

    def settled() -> ServerInfo | None:
        info = sup.housekeeping()
        seen.append(info)
        servers = sim_api_servers(machine)
        serving = bool(servers) and _healthy(sup.profile.url)
        if servers and serving and info.state == ServerState.RUNNING:
            return info
        if not servers and info.state in (ServerState.STOPPED, ServerState.CRASHED):
            return info
        return None

    def words() -> str:
        return f"the record to settle to what is there (last: {seen[-1:]})"

    return wait_until(settled, deadline_s=deadline_s, what=words, poll_s=0.25)


def _healthy(url: str) -> bool:
    try:
        return http.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.slow
@pytest.mark.timeout(900)  # 200 real operations: ~190-230 s on two busy cores, near 300 s
def test_randomized_soak_leaves_nothing_behind(machine: SimMachine, home: Path) -> None:
    rng = random.Random(SEED)
    profile = sim_profile(machine, "soak")
    profile_file.save_profile_file(locations.profiles_dir() / "soak.toml", profile)
    sock = str(machine.socket_path)
    check = memory_released_check(machine)
    sup = Supervisor(profile, memory_released=check)
    ran: set[int] = set()  # API server pids seen running
    counts: dict[str, int] = {}
    log_size = 0
    ops = ["start", "stop", "restart", "relaunch", "kill_server", "kill_vramtop", "reattach"]
    weights = [3, 2, 3, 2, 2, 2, 2]
    for i in range(OPS):
        op = rng.choices(ops, weights)[0]
        counts[op] = counts.get(op, 0) + 1
        if op == "start":
            assert sup.start().ok, (i, op, sup.status())
        elif op == "stop":
            assert sup.stop().ok, (i, op)
        elif op == "restart":
            assert sup.restart().ok, (i, op, sup.status())
        elif op == "relaunch":
            util = rng.choice([0.85, 0.88, 0.9, 0.93])
            # 163,840 tokens fit at every one of these budgets (262,144 only at 0.93).
            assert sup.relaunch(RelaunchOrder(FlagChange(util, max_model_len=163_840))).ok, (
                i,
                op,
                sup.status(),
            )
        elif op == "kill_server":
            info = sup.status()
            if info.pid and info.state.value in ("starting", "running"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(info.pid, signal.SIGKILL)
                # noticed by the next poll (here, or in the next operation's start)
                wait_until(
                    lambda sup=sup: sup.housekeeping().state.value == "crashed",
                    deadline_s=PROCESS_S,
                    what=f"op {i}: the killed server's record to say crashed",
                )
        elif op == "kill_vramtop":
            action = rng.choice(["start", "restart", "stop"])
            cli = subprocess.Popen(
                [sys.executable, "-m", "vramtop", action, "--profile", "soak", "-q"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(rng.uniform(0.1, 1.2))  # not a wait: the kill lands at a random moment
            cli.send_signal(signal.SIGKILL)
            cli.wait()
            # Nobody acts on the record any more: housekeeping settles it to the truth.
            converge(sup, machine)
        elif op == "reattach":
            # A new vramtop: must take over what is there, never start a second one.
            sup = Supervisor(profile, memory_released=check)
            assert sup.start().ok, (i, op, sup.status())
        servers = sim_api_servers(machine)
        assert len(servers) <= 1, (i, op, [p.pid for p in servers])
        info = sup.status()
        if info.state.value == "running" and info.pid:
            ran.add(info.pid)
        size = sup.log_path.stat().st_size
        assert size >= log_size, "the log was truncated"
        log_size = size

    assert sup.stop().ok
    # Nothing left: no simulated process, no simulated memory.
    assert sim_processes(sock) == []
    assert machine.state()["servers"] == []
    rec = state.load("soak")
    assert rec is not None and rec.state == "stopped"
    # Every server that ran left its whole startup in the one log file.
    text = sup.log_path.read_text()
    announced = {int(p) for p in re.findall(r"\(APIServer pid=(\d+)\).*Starting vLLM server", text)}
    assert ran <= announced
    assert text.count("=== vramtop: start") >= len(ran)
    assert len(ran) >= OPS // 10, counts
