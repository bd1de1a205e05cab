"""A step's phases as vramtop times them (held, stopped, memory released, launched, ready),
in the start's and the restart's timeline events: a fake clock for the arithmetic, real
processes (tests/supervisor/fake_server.py) for the moments."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from supervisor_helpers import fake_profile, ledger_empty

from tests.support.ports import free_port
from vramtop.event_log import EventLog
from vramtop.supervisor import Supervisor, step_phases
from vramtop.supervisor.step_phases import StepClock, Steps


class _Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_clock_counts_each_phase_from_the_moment_before_it() -> None:
    ticks = _Ticks()
    clock = StepClock(ticks)
    clock.mark("held")  # no step under way: nothing counted
    assert clock.phases() == {}
    clock.begin()
    for moment, at in (
        ("held", 102.0),
        ("sigterm", 102.5),
        ("exited", 104.0),
        ("memory_released", 104.25),
        ("launched", 104.5),
        ("ready", 170.5),
    ):
        ticks.now = at
        clock.mark(moment)
    ticks.now = 200.0
    clock.mark("exited")  # a second end (a failed start's leftovers) keeps the first
    assert clock.phases() == {
        "held_s": 2.0,
        "stopped_s": 1.5,  # SIGTERM → exit, not the hold before it
        "memory_released_s": 0.25,
        "launched_s": 0.25,
        "ready_s": 66.0,
        "total_s": 70.5,  # from the beginning to ready
    }
    assert clock.phases() == {}  # taken once


def test_a_start_counts_its_launch_from_the_steps_beginning() -> None:
    ticks = _Ticks()
    clock = StepClock(ticks)
    clock.begin()
    ticks.now = 101.0
    clock.mark("launched")
    ticks.now = 131.0
    clock.mark("ready")
    assert clock.phases() == {"launched_s": 1.0, "ready_s": 30.0, "total_s": 31.0}


def test_two_steps_at_once_each_count_their_own_moments() -> None:
    # An automatic restart launched on the housekeeping thread, its load followed on another;
    # meanwhile a person's restart on a third. Each marks its moments on its own thread.
    ticks = _Ticks()
    steps = Steps(ticks)
    steps.mark("launched")  # no step under way on this thread: nothing counted
    with steps.timing() as automatic:  # the housekeeping thread: begun at 100
        ticks.now = 101.0
        steps.mark("launched")
    assert steps.current() is None  # the housekeeping thread times nothing after it

    def person() -> None:
        ticks.now = 110.0
        with steps.timing() as mine:
            for moment, at in (("held", 111.0), ("sigterm", 111.5), ("exited", 113.0)):
                ticks.now = at
                steps.mark(moment)
            steps.held({"replayed": 2})
            ticks.now = 114.0
            steps.mark("launched")
            ticks.now = 150.0
            steps.mark("ready")
        done.append(mine)

    def follower() -> None:
        with steps.timing(automatic):  # carried on from the housekeeping thread
            person_thread.start()
            person_thread.join()
            ticks.now = 151.0
            steps.mark("ready")  # (never seen in this run: its server was replaced)

    done: list[StepClock] = []
    person_thread = threading.Thread(target=person)
    follow_thread = threading.Thread(target=follower)
    follow_thread.start()
    follow_thread.join()
    (mine,) = done
    assert automatic.phases() == {"launched_s": 1.0, "ready_s": 50.0, "total_s": 51.0}
    assert automatic.held == {}  # the person's hold is not the automatic restart's
    assert mine.phases() == {
        "held_s": 1.0,
        "stopped_s": 1.5,
        "launched_s": 1.0,
        "ready_s": 36.0,
        "total_s": 40.0,
    }
    assert mine.held == {"replayed": 2}


def test_the_start_and_restart_events_carry_vramtops_phases(home: Path, ledger: Path) -> None:
    sup = Supervisor(
        fake_profile("steps", free_port(), ledger), memory_released=lambda: ledger_empty(ledger)
    )
    try:
        assert sup.start().ok
        assert sup.restart().ok
    finally:
        assert sup.stop().ok
    events = {e.name: e.detail for e in EventLog.for_profile("steps").read()}
    start, restart = events["start"]["phases"], events["restart"]["phases"]
    assert isinstance(start, dict) and isinstance(restart, dict)
    assert {"launched_s", "ready_s", "total_s"} <= start.keys()
    assert "stopped_s" not in start  # a start stops nothing
    mine = ("stopped_s", "memory_released_s", "launched_s", "ready_s")
    assert set(mine) | {"total_s"} <= restart.keys()
    assert "held_s" not in restart  # no front door: nothing held
    seconds = [restart[k] for k in mine]
    assert all(isinstance(s, float) and s >= 0 for s in seconds)
    assert sum(seconds) <= restart["total_s"]  # type: ignore[arg-type]


def test_the_restart_event_names_its_slow_parts(
    home: Path, ledger: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The model read from a Windows drive at 0.54 GB/s, and a
    # compilation of 43 s after one of 5 s.
    table = tmp_path / "mounts"
    table.write_text("/dev/sdc / ext4 rw 0 0\ndrvfs /mnt/c 9p rw,aname=drvfs 0 0\n")
    monkeypatch.setattr(step_phases, "MOUNTS", table)
    said = tmp_path / "lines"
    weights = (
        "Loading weights took 4.00 seconds\nModel loading took 2.00 GiB memory and 4.10 seconds"
    )
    said.write_text(f"{weights}\ntorch.compile takes 5.0 s in total\n")
    profile = fake_profile("slow", free_port(), ledger, FAKE_START_LINES=str(said))
    profile = profile.model_copy(update={"argv": [*profile.argv, "--model", "/mnt/c/models/q"]})
    sup = Supervisor(profile, memory_released=lambda: ledger_empty(ledger))
    try:
        assert sup.start().ok
        said.write_text(f"{weights}\ntorch.compile takes 43.0 s in total\n")
        assert sup.restart().ok
    finally:
        assert sup.stop().ok
    events = {e.name: e.detail for e in EventLog.for_profile("slow").read()}
    slow = events["restart"]["slow_parts"]
    assert isinstance(slow, list) and len(slow) == 2
    assert str(slow[0]).startswith(
        "weights loaded at 0.54 GB/s from /mnt/c/models/q, on a Windows drive"
    )
    assert str(slow[1]).startswith("compilation took 43 s against 5 s the start before")
    assert "torch_compile_cache" in str(slow[1])
    assert "compilation" not in str(events["start"].get("slow_parts"))  # no start before it


def test_each_action_says_it_is_under_way_while_it_runs(home: Path, ledger: Path) -> None:
    from vramtop.supervisor.under_way import under_way

    sup = Supervisor(
        fake_profile("busy", free_port(), ledger), memory_released=lambda: ledger_empty(ledger)
    )
    seen: dict[str, set[object]] = {}

    def watching(action: str) -> Callable[[str], None]:
        def progress(_step: str) -> None:
            holder = under_way("busy")
            seen.setdefault(action, set()).add(holder["kind"] if holder else None)

        return progress

    try:
        assert sup.start(watching("start")).ok
        assert sup.restart(watching("restart")).ok
        assert under_way("busy") is None  # done: nothing said under way
    finally:
        assert sup.stop(watching("stop")).ok
    assert seen == {"start": {"start"}, "restart": {"restart"}, "stop": {"stop"}}
    assert under_way("busy") is None
