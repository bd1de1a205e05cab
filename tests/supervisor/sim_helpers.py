"""Helpers for supervisor tests on the simulated machine."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import psutil

from tests.support.ports import free_port
from tests.support.waiting import PROCESS_S
from vramtop.config import Profile
from vramtop.core.json_types import JsonObject
from vramtop.sim.machine import SimMachine
from vramtop.supervisor import door
from vramtop.supervisor.state import ServerRecord


def sim_profile(machine: SimMachine, name: str, util: float = 0.93) -> Profile:
    port = free_port()
    env = machine.server_env()
    keep = ("VRAMTOP_SIM_SOCKET", "VRAMTOP_SIM_SPEED", "VRAMTOP_SIM_STARTUP_S")
    return Profile(
        name=name,
        argv=machine.server_argv(util=util, port=port),
        env={k: env[k] for k in keep if k in env},
        port=port,
        stop_timeout_s=5,
    )


def sim_api_servers(machine: SimMachine) -> list[psutil.Process]:
    """Every live fake API server on this simulated GPU."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if "vramtop.sim.server" not in " ".join(proc.cmdline()[:4]):
                continue
            if proc.environ().get("VRAMTOP_SIM_SOCKET") == str(machine.socket_path):
                found.append(proc)
    return found


def gone(pids: Iterable[int]) -> bool:
    """True when none of `pids` is alive (a zombie holds nothing and counts as gone)."""
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.Error:
            continue
    return True


def door_report(rec: ServerRecord) -> JsonObject:
    """The door's own report, given a busy machine's time to answer: vramtop asks with 1 s
    and takes no answer for none, which a test reading the door's figures must not."""
    report = door.info(rec, timeout_s=PROCESS_S)
    assert report is not None, f"the door on {rec.front_door} did not answer"
    return report
