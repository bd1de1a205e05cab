"""A front door no record names: its start was interrupted (inside the spawn itself) or killed
before the record was saved. It holds its port, and any request sent to it, for nobody; the
profile's next `stop` ends it and says so, its next start does too instead of refusing the
port, and `status` names it.
Doors of another profile, the record's own door, and another user's processes are left."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from supervisor_helpers import fake_profile

from tests.support.ports import free_port
from vramtop import cli, profiles
from vramtop.config import Profile
from vramtop.supervisor import Supervisor, door, state, tree


@contextmanager
def stray(profile: str) -> Iterator[tuple[int, float | None, str]]:
    """A door started for `profile` as a start does, with no record naming it."""
    address = f"127.0.0.1:{free_port()}"
    spawned = door.spawn(profile, address, None, 600.0)
    assert not isinstance(spawned, str), spawned
    pid, made = spawned
    try:
        yield pid, made, address
    finally:
        door.stop(
            state.ServerRecord(
                profile=profile, front_door=address, door_pid=pid, door_create_time=made
            )
        )


def door_profile(name: str, address: str, ledger: Path) -> Profile:
    return fake_profile(name, free_port(), ledger).model_copy(update={"front_door": address})


def test_stop_ends_a_door_no_record_names_and_leaves_another_profiles(
    home: Path, ledger: Path
) -> None:
    with stray("p1") as (pid, made, address), stray("p2") as (other, other_made, _):
        result = Supervisor(door_profile("p1", address, ledger)).stop()
        assert result.ok, result.message
        assert result.message == (
            f"not running; ended a front door left by an interrupted start (pid {pid})"
        )
        assert not tree.process_alive(pid, made), "the stray door was left"
        assert tree.process_alive(other, other_made), "another profile's door was ended"


def test_a_start_ends_the_stray_holding_its_door_port_instead_of_refusing(
    home: Path, ledger: Path
) -> None:
    with stray("p1") as (pid, made, address):
        sup = Supervisor(door_profile("p1", address, ledger))
        started = sup.start()
        try:
            assert started.ok, started.message
            rec = state.load("p1")
            assert rec is not None and rec.door_pid not in (None, pid)
            assert not tree.process_alive(pid, made)
        finally:
            assert sup.stop().ok


def test_the_records_own_door_and_another_users_are_not_strays(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with stray("p1") as (pid, _, _):
        assert [p.pid for p in door.strays("p1", None)] == [pid]
        assert door.strays("p1", pid) == []  # the record's door
        monkeypatch.setattr(os, "getuid", lambda: os.geteuid() + 1)
        assert door.strays("p1", None) == []  # the same command line, another user's


def test_status_names_a_stray_door_and_stop_ends_it(
    home: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with stray("p1") as (pid, made, address):
        profiles.save_profile(door_profile("p1", address, ledger))
        assert cli.main(["status", "--profile", "p1", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["stray_door_pids"] == [pid]
        assert cli.main(["status", "--profile", "p1"]) == 0
        said = capsys.readouterr().out
        assert f"stray front door (pid {pid}): left by an interrupted start; stop ends it" in said
        assert cli.main(["stop", "--profile", "p1"]) == 0
        assert f"ended a front door left by an interrupted start (pid {pid})" in (
            capsys.readouterr().out
        )
        assert not tree.process_alive(pid, made)
        assert cli.main(["status", "--profile", "p1", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["stray_door_pids"] == []


def test_a_stray_door_alone_is_something_left_for_the_demo(home: Path) -> None:
    """With the demo's simulated machine gone (idled out), a stray door is still something
    running: `stop --demo` and `status --demo` go on to end it and name it."""
    from vramtop.machines import demo_world

    machine = demo_world.demo_machine()
    profile = demo_world.demo_profile_name(demo_world.DEFAULT_CARD)
    assert demo_world.nothing_left(machine, profile)
    with stray(profile):
        assert not demo_world.nothing_left(machine, profile)
