"""The machine backend's frames carry the action under way on the profile's server from any
process: here a real second process holding the profile's action lock as `vramtop restart`
does (`under_way.acting`), the console's header says it from the frame; nothing once that
process has gone, nor for a backend without a profile."""

from __future__ import annotations

import time
from pathlib import Path

from supervisor_helpers import NoGpu, fake_profile, free_port

from tests.support.acting_elsewhere import acting_elsewhere
from vramtop.core.step_report import UnderWay
from vramtop.machines.machine_backend import MachineBackend
from vramtop.machines.sampler import Sampler
from vramtop.supervisor import Supervisor

NAME = "elsewhere"


def test_another_process_restarting_the_server_is_in_the_frame(home: Path, ledger: Path) -> None:
    sup = Supervisor(fake_profile(NAME, free_port(), ledger))
    backend = MachineBackend(sampler=Sampler(probe=NoGpu(), url=None), supervisor=sup)
    try:
        assert backend.tick(log_limit=0).under_way is None  # nothing under way
        before = time.time()
        with acting_elsewhere(NAME) as other:
            acting = backend.tick(log_limit=0).under_way
            assert acting is not None and (acting.action, acting.pid) == ("restart", other.pid)
            assert acting.state_word == "restarting"
            assert acting.since is not None and acting.since >= before
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
