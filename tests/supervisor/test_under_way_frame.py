"""The machine backend's frames carry the action under way on the profile's server from any
process: here a real second process holding the profile's action lock as `vramtop restart`
does (`under_way.acting`), the console's header says it from the frame; nothing once that
process has gone, nor for a backend without a profile."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from supervisor_helpers import NoGpu, fake_profile, free_port

from vramtop.core.step_report import UnderWay
from vramtop.machines.machine_backend import MachineBackend
from vramtop.machines.sampler import Sampler
from vramtop.supervisor import Supervisor

NAME = "elsewhere"

# Another terminal's `vramtop restart`, as far as the action lock goes: it acts on the profile's
# server, says so, and holds on until its stdin closes.
RESTART_CODE = f"""
import sys
from vramtop.config import Profile
from vramtop.supervisor.handle import ServerHandle
from vramtop.supervisor.under_way import acting
profile = Profile(name={NAME!r}, argv=["vllm", "serve", "m"], port=1)
with acting(ServerHandle(profile), "restart", "command"):
    print("acting", flush=True)
    sys.stdin.read()
"""


def test_another_process_restarting_the_server_is_in_the_frame(home: Path, ledger: Path) -> None:
    sup = Supervisor(fake_profile(NAME, free_port(), ledger))
    backend = MachineBackend(sampler=Sampler(probe=NoGpu(), url=None), supervisor=sup)
    try:
        assert backend.tick(log_limit=0).under_way is None  # nothing under way
        before = time.time()
        other = subprocess.Popen(
            [sys.executable, "-c", RESTART_CODE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert other.stdout is not None and other.stdout.readline().strip() == "acting"
            acting = backend.tick(log_limit=0).under_way
            assert acting is not None and (acting.action, acting.pid) == ("restart", other.pid)
            assert acting.state_word == "restarting"
            assert acting.since is not None and acting.since >= before
        finally:
            assert other.stdin is not None
            other.stdin.close()
            assert other.wait(30) == 0
        assert backend.tick(log_limit=0).under_way is None  # done: its lock let go
    finally:
        backend.close(stop_server=False)


def test_a_backend_without_a_profile_has_none(home: Path) -> None:
    backend = MachineBackend(sampler=Sampler(probe=NoGpu(), url=None), supervisor=None)
    try:
        assert backend.tick(log_limit=0).under_way is None
    finally:
        backend.close(stop_server=False)


def test_under_way_in_json_as_status_gives_it() -> None:
    acting = UnderWay(action="relaunch", pid=42, since=1000.0)
    assert acting.to_json(1012.34) == {
        "action": "relaunch",
        "state_word": "relaunching",
        "pid": 42,
        "since": 1000.0,
        "seconds": 12.3,
    }
    assert UnderWay("stop", None, None).to_json(1.0)["seconds"] is None
