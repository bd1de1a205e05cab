"""The console reaches a person looking at another window through the terminal itself: OSC
9;4 (Windows Terminal's taskbar error state) while a finding is open, cleared when it closes,
and an OSC 777 notification for each; written through Textual's driver, the terminal's one
writer. And the lasting timeline: a console opened after a relaunch shows it, as earlier."""

from __future__ import annotations

import time
from typing import Any

import pytest
from textual.drivers.headless_driver import HeadlessDriver
from textual.widgets import DataTable

from tests.support.console import make_app, open_timeline, settle, ticks, toggle_call
from tests.support.fake_backend import FakeBackend
from vramtop.event_log import EventLog
from vramtop.tui.screens.timeline_screen import TimelineScreen

TASKBAR_ERROR = "\x1b]9;4;2;100\x07"
TASKBAR_CLEAR = "\x1b]9;4;0\x07"


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the console writes to the terminal through Textual's (headless) driver."""
    seen: list[str] = []
    monkeypatch.setattr(HeadlessDriver, "write", lambda self, data: seen.append(data))
    monkeypatch.delenv("TMUX", raising=False)
    return seen


def osc(written: list[str]) -> list[str]:
    return [w for w in written if w.startswith("\x1b]9;4;") or w.startswith("\x1b]777;")]


async def test_a_finding_opening_and_closing_sets_and_clears_the_taskbar_and_notifies(
    written: list[str],
) -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 2)
        assert osc(written) == []  # nothing open: nothing said
        await toggle_call(pilot)  # a simulated call: the fake backend collapses
        await settle(pilot)
        await ticks(pilot, 4)
        assert backend.findings_open("vram_contention")
        opened = "".join(written)
        assert TASKBAR_ERROR in opened
        assert "\x1b]777;notify;vLLM: The desktop is squeezing vLLM's memory;" in opened
        assert TASKBAR_CLEAR not in opened
        before = len(written)
        await ticks(pilot, 2)
        assert len(osc(written[before:])) == 0  # still open: said once
        await pilot.press("r")
        await settle(pilot)
        await pilot.press("r")  # requests were running: the second r confirms
        await settle(pilot)
        await ticks(pilot, 1)
        assert not backend.findings_open("vram_contention")
        closed = "".join(written[before:])
        assert TASKBAR_CLEAR in closed
        assert "\x1b]777;notify;vLLM recovered: vram contention is over;" in closed
    # The finding went into the profile's lasting timeline too, opened then closed.
    logged = [e for e in EventLog.for_profile("qwen-27b").read() if e.name == "finding"]
    assert [(e.detail["kind"], e.detail["change"], e.detail["told_by"]) for e in logged] == [
        ("vram_contention", "opened", "console"),  # told by the console: a guard that takes
        ("vram_contention", "closed", "console"),  # over does not tell the opening again
    ]


async def test_a_recording_played_back_tells_nothing(written: list[str]) -> None:
    backend = FakeBackend()
    backend.recorded = True
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 2)
        await toggle_call(pilot)
        await settle(pilot)
        await ticks(pilot, 4)
        assert backend.findings_open("vram_contention")
    assert osc(written) == []


async def test_inside_tmux_the_sequences_are_wrapped_for_passthrough(
    written: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMUX", "/tmp/tmux-1000/default,1,0")
    app = make_app(FakeBackend())
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 2)
        await toggle_call(pilot)
        await settle(pilot)
        await ticks(pilot, 4)
    wrapped = [w for w in written if w.startswith("\x1bPtmux;")]
    assert "".join(wrapped).startswith("\x1bPtmux;\x1b\x1b]9;4;2;100\x07\x1b\\\x1bPtmux;")


async def test_the_console_opened_after_a_relaunch_shows_it_as_earlier(
    written: list[str],
) -> None:
    # What the supervisor writes once a relaunch asked from the command line has served.
    from vramtop.outcomes import ActionResult
    from vramtop.supervisor.action_events import action_done, write_action

    assert write_action(
        action_done(
            "qwen-27b",
            "relaunch",
            ActionResult(True, "relaunched"),
            asked_by="command",
            before=("a", "running"),
            after=("b", "running"),
            detail={"gpu_memory_utilization": 0.85},
        )
    )
    (logged,) = EventLog.for_profile("qwen-27b").read()
    assert logged.t <= time.time()
    app = make_app(FakeBackend())
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        await open_timeline(pilot)
        assert isinstance(app.screen, TimelineScreen)
        table = app.screen.query_one(DataTable)
        rows: list[Any] = [table.get_row_at(i) for i in range(table.row_count)]
    assert rows[0][1] == "relaunch (earlier)"
    assert "budget 0.85" in str(rows[0][2]) and "served" in str(rows[0][2])
    # The session's own events follow, timed by the session.
    assert [r[1] for r in rows[1:]][:2] == ["start", "ready"]


async def test_while_a_guard_holds_the_actor_lock_the_console_only_shows(
    written: list[str],
) -> None:
    # The guard's lock, held by another process (an flock is per open file: a child holds it).
    import subprocess
    import sys

    from vramtop.supervisor.actor import GUARD, ActorLock

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from vramtop.supervisor.actor import ActorLock\n"
            "assert ActorLock('qwen-27b', 'guard').try_acquire()\n"
            "print('held', flush=True)\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        holding = ActorLock("qwen-27b", "console").holder()
        assert holding is not None and holding["kind"] == GUARD
        backend = FakeBackend()
        app = make_app(backend)
        async with app.run_test(size=(100, 30)) as pilot:
            await ticks(pilot, 2)
            await toggle_call(pilot)
            await settle(pilot)
            await ticks(pilot, 4)
            assert backend.findings_open("vram_contention")  # shown in the banner …
            assert osc(written) == []  # … but told by the guard alone
            assert EventLog.for_profile("qwen-27b").read() == []
            # What the guard writes meanwhile is in the console's timeline, marked as its.
            EventLog.for_profile("qwen-27b").append(
                time.time(), "finding", {"kind": "vram_contention", "change": "opened"}
            )
            await open_timeline(pilot)
            assert isinstance(app.screen, TimelineScreen)
            table = app.screen.query_one(DataTable)
            names = [table.get_row_at(i)[1] for i in range(table.row_count)]
            assert names[0] == "finding (guard)"
    finally:
        holder.kill()
        holder.wait()


async def test_a_guard_started_beside_the_console_takes_over_and_it_only_shows(
    written: list[str],
) -> None:
    # A guard in another process: it takes the guard lock, then waits for the console to
    # hand over the actor lock (as `vramtop guard` does), and leaves when told.
    import os
    import subprocess
    import sys

    from vramtop.supervisor.actor import CONSOLE, GUARD, ActorLock

    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 2)
        holding = ActorLock("qwen-27b", CONSOLE).holder()
        assert holding is not None and holding["kind"] == CONSOLE  # the console acts
        assert holding["pid"] == os.getpid()
        guard = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys\n"
                "from vramtop.supervisor.actor import ActorLock, guard_lock\n"
                "assert guard_lock('qwen-27b').try_acquire()\n"
                "print('guard lock', flush=True)\n"
                "print('acts' if ActorLock('qwen-27b', 'guard').wait_acquire(30) else 'no',"
                " flush=True)\n"
                "sys.stdin.readline()\n",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert guard.stdout is not None and guard.stdout.readline() == "guard lock\n"
            await ticks(pilot, 2)  # the console's next tick hands over
            assert guard.stdout.readline() == "acts\n"
            # A person's keys here still act: the status line says so.
            assert app.shown.activity == "a guard watches; your keys still act"
            holding = ActorLock("qwen-27b", CONSOLE).holder()
            assert holding is not None and holding["kind"] == GUARD
            before = len(written)
            await toggle_call(pilot)
            await settle(pilot)
            await ticks(pilot, 4)
            assert backend.findings_open("vram_contention")  # shown …
            assert osc(written[before:]) == []  # … and told by the guard alone
        finally:
            assert guard.stdin is not None
            guard.stdin.close()
            guard.wait(30)
        await ticks(pilot, 2)  # the guard has gone: the console acts again
        # (said after the call's words, a result still told: both are read)
        said = app.shown.activity or ""
        assert said.endswith("the guard has left: this console acts again"), said
        holding = ActorLock("qwen-27b", CONSOLE).holder()
        assert holding is not None and holding["pid"] == os.getpid()
