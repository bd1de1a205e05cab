"""One actor per profile: the lock another process holds, who holds it, and its release."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vramtop.supervisor.actor import (
    CONSOLE,
    GUARD,
    ActorLock,
    guard_holder,
    read_guard_state,
    write_guard_state,
)

HOLD = textwrap.dedent(
    """
    import sys, time
    from vramtop.supervisor.actor import ActorLock
    lock = ActorLock("p1", "guard")
    print("held" if lock.try_acquire() else "refused", flush=True)
    sys.stdin.readline()
    """
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path))
    return tmp_path


def test_a_second_process_cannot_take_the_lock_and_sees_who_holds_it(home: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        console = ActorLock("p1", CONSOLE)
        assert not console.try_acquire()
        who = console.holder()
        assert who is not None and who["pid"] == holder.pid and who["kind"] == GUARD
        assert ActorLock("another-profile", CONSOLE).try_acquire()  # per profile
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)
    # The kernel let it go with the process.
    assert console.holder() is None
    assert console.try_acquire() and console.holder() is not None
    console.release()
    assert console.holder() is None


GUARD_HOLDS = textwrap.dedent(
    """
    import sys
    from vramtop.supervisor.actor import guard_lock
    lock = guard_lock("p3", auto_remedy=sys.argv[1] == "auto")
    print("held" if lock.try_acquire() else "refused", flush=True)
    sys.stdin.readline()
    """
)


@pytest.mark.parametrize("auto", [True, False])
def test_the_guard_lock_says_whether_its_guard_acts_on_its_own(home: Path, auto: bool) -> None:
    guard = subprocess.Popen(
        [sys.executable, "-c", GUARD_HOLDS, "auto" if auto else "tells"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert guard.stdout is not None and guard.stdout.readline().strip() == "held"
        who = guard_holder("p3")
        assert who is not None and who["pid"] == guard.pid and who["auto_remedy"] is auto
    finally:
        assert guard.stdin is not None
        guard.stdin.close()
        guard.wait(10)
    assert guard_holder("p3") is None
    # A lock that does not say (a console's, an older guard's): unknown, not "off".
    with ActorLock("p4", GUARD) as lock:
        assert lock.try_acquire()
        holder = lock.holder()
        assert holder is not None and holder["auto_remedy"] is None


def test_the_adaptive_state_is_read_only_while_its_guard_holds_the_lock(home: Path) -> None:
    write_guard_state("p2", outside=0.93, during=0.83, down=1700000000.0, up=None)
    assert read_guard_state("p2") is None  # no guard holds the lock
    with ActorLock("p2", GUARD) as lock:
        assert lock.try_acquire()
        assert read_guard_state("p2") == {
            "outside": 0.93,
            "during": 0.83,
            "down": 1700000000.0,
            "up": None,
        }
    assert read_guard_state("p2") is None


def test_waiting_for_the_lock_tells_who_holds_it_once_and_gives_up_in_time(home: Path) -> None:
    from vramtop.supervisor.actor import guard_holder, guard_lock

    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD.replace('"guard"', '"console"')],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    told: list[dict[str, object]] = []
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        guard = ActorLock("p1", GUARD)
        assert not guard.wait_acquire(0.3, poll_s=0.05, waiting=told.append)
        assert [(t["pid"], t["kind"]) for t in told] == [(holder.pid, CONSOLE)]  # said once
        # The guard lock is another file: a console's actor lock does not hold it.
        assert guard_holder("p1") is None
        with guard_lock("p1") as only:
            assert only.try_acquire()
            who = guard_holder("p1")
            assert who is not None and who["kind"] == GUARD
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)
    assert guard.wait_acquire(5.0) and guard.holder() is not None
    guard.release()


def test_the_console_asks_once_a_tick_and_never_waits_on_its_event_loop(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holding the lock: the console's one try fails at once (the next
    tick tries again), where the default tries a few times, a pause apart."""
    from vramtop.supervisor import actor
    from vramtop.tui.telling import console_may_notify

    pauses: list[float] = []
    monkeypatch.setattr(actor.time, "sleep", pauses.append)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"

        class Live:
            recorded = False

        assert not console_may_notify(Live(), ActorLock("p1", CONSOLE))  # type: ignore[arg-type]
        assert pauses == []
        assert not ActorLock("p1", CONSOLE).try_acquire()
        assert len(pauses) == actor.ACQUIRE_TRIES - 1
    finally:
        holder.communicate("\n", timeout=30)
