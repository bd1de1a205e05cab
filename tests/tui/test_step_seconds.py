"""The status line while a start, restart or relaunch runs: its seconds so far and, once a
step was seen, the last one's total as the time to expect."""

from __future__ import annotations

import threading

from test_console_app import text

from tests.support.console import make_app, settle, ticks
from tests.support.fake_backend import FakeBackend
from vramtop.core.model import ServerState
from vramtop.core.step_report import under_way_words
from vramtop.event_log import EventLog
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.tui.widgets.console_header import ConsoleHeader


class _Loading(FakeBackend):
    """A start that loads until the test lets it be ready."""

    def __init__(self) -> None:
        super().__init__()
        self.state = ServerState.STOPPED
        self.ready = threading.Event()

    def start(self, progress: ProgressCallback | None = None) -> ActionResult:
        self.state = ServerState.STARTING
        if progress is not None:
            progress("loading weights")
        self.ready.wait(timeout=30)
        self.state = ServerState.RUNNING
        return ActionResult(True, "ready")


async def _header_while_loading(seconds: int) -> str:
    backend = _Loading()
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("s")
        await pilot.pause()
        await ticks(pilot, seconds)  # each read is a second of the fake clock
        shown = text(app, ConsoleHeader)
        backend.ready.set()
        await settle(pilot)
    return shown


async def test_the_seconds_and_the_last_steps_total_show_at_80_columns() -> None:
    EventLog.for_profile("qwen-27b").append(
        1000.0, "restart", {"result": "ok", "phases": {"stopped_s": 1.0, "total_s": 74.4}}
    )
    assert "start: loading weights… 3 s (last 74 s)" in await _header_while_loading(3)


async def test_before_any_step_only_the_seconds_show() -> None:
    shown = await _header_while_loading(2)
    assert "start: loading weights… 2 s" in shown and "last" not in shown


def test_the_words_stay_short() -> None:
    longest = under_way_words("relaunch", "capturing graphs", 1234.0, 1234.0)
    assert longest == "relaunch: capturing graphs… 1234 s (last 1234 s)"
    assert len(longest) <= 50


async def test_one_clock_while_the_console_steps() -> None:
    # Seen: "● relaunching pid 9221 · 0s so far (last start: 3.0s) · budget 0.83  relaunch:
    # launching… 3 s (last 4 s)": the load's seconds beside the step's, two clocks that
    # disagree. While this console's step runs, the status line's seconds are the only ones.
    EventLog.for_profile("qwen-27b").append(
        1000.0, "restart", {"result": "ok", "phases": {"stopped_s": 1.0, "total_s": 74.4}}
    )
    shown = await _header_while_loading(3)
    assert "start: loading weights… 3 s (last 74 s)" in shown
    assert "so far" not in shown and "last start" not in shown, shown
