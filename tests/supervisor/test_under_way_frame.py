"""The machine backend's frames carry the action under way on the profile's server from any
process: here a real second process holding the profile's action lock as `vramtop restart`
does (`under_way.acting`), the console's header says it from the frame; nothing once that
process has gone, nor for a backend without a profile."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from supervisor_helpers import NoGpu, fake_profile

from tests.support.acting_elsewhere import acting_elsewhere, lock_held_elsewhere
from tests.support.ports import free_port
from vramtop.core.step_report import UnderWay
from vramtop.machines.machine_backend import MachineBackend
from vramtop.machines.sampler import Sampler
from vramtop.supervisor import Supervisor
from vramtop.supervisor.under_way import action_lock_path, action_under_way, taken

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
    acting = UnderWay(action="relaunch", pid=42, since=1000.0, asked_by="guard")
    assert acting.to_json(1012.34) == {
        "action": "relaunch",
        "state_word": "relaunching",
        "pid": 42,
        "since": 1000.0,
        "seconds": 12.3,
        "asked_by": "guard",
    }
    assert UnderWay("stop", None, None).to_json(1.0)["seconds"] is None
    assert UnderWay("stop", None, None).to_json(1.0)["asked_by"] is None


@pytest.mark.parametrize("asked_by", ["key", "command", "guard", "auto_restart"])
def test_who_asked_is_read_from_the_lock(home: Path, asked_by: str) -> None:
    with acting_elsewhere(NAME, "relaunch", asked_by=asked_by) as other:
        acting = action_under_way(NAME)
        assert acting is not None and (acting.action, acting.pid) == ("relaunch", other.pid)
        assert acting.asked_by == asked_by


@pytest.mark.parametrize(
    "asked_by",
    [
        None,  # an older vramtop's lock: it does not say
        42,
        ["key"],
        {"who": "key"},
        "root",  # no asker vramtop knows
        "k" * 300,  # (a file over its read, 4 KiB, is damaged: no action at all)
    ],
)
def test_a_lock_that_does_not_say_who_asked_plainly_says_nobody(
    home: Path, asked_by: object
) -> None:
    record: dict[str, object] = {"pid": 4321, "kind": "restart", "since": 1000.5}
    if asked_by is not None:
        record["asked_by"] = asked_by
    with lock_held_elsewhere(action_lock_path(NAME), json.dumps(record)):
        assert action_under_way(NAME) == UnderWay("restart", 4321, 1000.5, None)


@pytest.mark.parametrize(
    "content", ["", "{", "not json", "\udcff\udcfe", "[1, 2]", '{"kind": "reboot"}', "[" * 5000]
)
def test_a_damaged_lock_says_no_action(home: Path, content: str) -> None:
    with lock_held_elsewhere(action_lock_path(NAME), content):
        assert action_under_way(NAME) is None


def test_an_action_begun_beside_another_of_this_process_is_said_once_that_one_ends(
    home: Path,
) -> None:
    # A person's restart while this process's automatic restart's server loads: both act;
    # the lock names the first, then the one still under way, from its own beginning.
    automatic = taken(NAME, "restart", "auto_restart")
    began = time.time()
    mine = taken(NAME, "restart", "key")
    acting = action_under_way(NAME)
    assert acting is not None and acting.asked_by == "auto_restart"
    automatic.release()
    acting = action_under_way(NAME)
    assert acting is not None and (acting.action, acting.asked_by) == ("restart", "key")
    assert acting.since is not None and began <= acting.since <= time.time()
    mine.release()
    assert action_under_way(NAME) is None
    later = taken(NAME, "stop", "command")  # nothing left waiting: taken afresh
    try:
        acting = action_under_way(NAME)
        assert acting is not None and (acting.action, acting.asked_by) == ("stop", "command")
    finally:
        later.release()
