"""A front door no record names: its start was interrupted (inside the spawn itself) or killed
before the record was saved. It holds its port, and any request sent to it, for nobody; the
profile's next `stop` ends it, and its next start does too instead of refusing the port.
Doors of another profile, the record's own door, and another user's processes are left."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from supervisor_helpers import fake_profile

from tests.support.ports import free_port
from vramtop.config import Profile
from vramtop.supervisor import Supervisor, door, door_process, state, tree


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
        assert [p.pid for p in door_process.strays("p1", None)] == [pid]
        assert door_process.strays("p1", pid) == []  # the record's door
        monkeypatch.setattr(os, "getuid", lambda: os.geteuid() + 1)
        assert door_process.strays("p1", None) == []  # the same command line, another user's
