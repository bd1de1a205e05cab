"""While an action runs, the header's state word is the action's own ("● restarting"): the
server's state moves through stopped and starting meanwhile, and "● stopped" beside
"restart: launching…" (or "● running" beside "restart: memory released…") read apart."""

from __future__ import annotations

import re
import threading
from dataclasses import replace

import pytest
from textual.pilot import Pilot

from tests.support.console import (
    NO_TIMER,
    make_app,
    settle,
    status_line,
    text,
    ticks,
    wait_for,
)
from tests.support.fake_backend import FakeBackend
from tests.support.waiting import PROCESS_S
from vramtop.core.model import Sample, ServerState
from vramtop.core.step_report import UnderWay
from vramtop.machines.interface import LOG_TAIL, Frame
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.tui.app import VramtopApp
from vramtop.tui.messages import ActionFinished, SampleArrived
from vramtop.tui.runner import NOT_READ_YET, OUTCOME_WAIT_S
from vramtop.tui.widgets.console_header import ConsoleHeader


class _Paused(FakeBackend):
    """Actions that stop at each step until the test lets them go on: the server's state
    as the supervisor moves it (stopped once the old server is gone, starting while the new
    one loads)."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Semaphore(0)

    def _step(self, progress: ProgressCallback | None, step: str, state: ServerState) -> None:
        self.state = state
        if progress is not None:
            progress(step)
        assert self.go.acquire(timeout=30)

    def restart(
        self, progress: ProgressCallback | None = None, requests_lost: bool = False
    ) -> ActionResult:
        self.calls.append(("restart",))
        self._step(progress, "memory released", ServerState.RUNNING)
        self._step(progress, "launching", ServerState.STOPPED)
        self._step(progress, "loading weights", ServerState.STARTING)
        self.state = ServerState.RUNNING
        return ActionResult(True, "vLLM restarted.")

    def stop(self, progress: ProgressCallback | None = None) -> ActionResult:
        self.calls.append(("stop",))
        self._step(progress, "memory released", ServerState.RUNNING)
        self.state = ServerState.STOPPED
        return ActionResult(True, "vLLM stopped.")


def _state_line(app: VramtopApp) -> str:
    return next(line for line in text(app, ConsoleHeader).splitlines() if "●" in line)


async def _step_shown(pilot: Pilot[int], app: VramtopApp, backend: _Paused, step: str) -> str:
    await wait_for(pilot, lambda: f": {step}…" in text(app, ConsoleHeader))
    await ticks(pilot, 1)  # a sample read in the step: the server's state then
    return _state_line(app)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_a_restart_says_restarting_at_every_step(size: tuple[int, int]) -> None:
    backend = _Paused()
    app = make_app(backend)
    async with app.run_test(size=size) as pilot:
        await ticks(pilot, 1)
        await pilot.press("r", "r")
        for step in ("memory released", "launching", "loading weights"):
            line = await _step_shown(pilot, app, backend, step)
            assert "● restarting" in line, (step, line)
            for word in ("running", "stopped", "starting"):
                assert f"● {word}" not in line, (step, line)
            backend.go.release()
        await settle(pilot)
        assert "● running" in _state_line(app)  # the action done: the server's own state


async def test_a_stop_says_stopping_until_it_is_done() -> None:
    backend = _Paused()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("s", "s")
        line = await _step_shown(pilot, app, backend, "memory released")
        assert "● stopping" in line and "● running" not in line, line
        backend.go.release()
        await settle(pilot)
        await ticks(pilot, 1)
        assert "● stopped" in _state_line(app)


class _SlowQuit(_Paused):
    def close(self, stop_server: bool) -> None:
        assert self.go.acquire(timeout=30)
        super().close(stop_server)


async def test_quitting_with_a_stop_says_stopping() -> None:
    backend = _SlowQuit()
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("s")  # stop vLLM, then quit
        await wait_for(pilot, lambda: "then quitting" in text(app, ConsoleHeader))
        await ticks(pilot, 1)
        assert "● stopping" in _state_line(app)
        backend.go.release()
        await wait_for(pilot, lambda: not app.is_running)


class _HeldRead(_Paused):
    """A read that the test holds once it has taken its sample: what a read begun while the
    action runs (the new server still starting) brings after the action has ended."""

    def __init__(self) -> None:
        super().__init__()
        self.hold: threading.Event | None = None
        self.inside = threading.Event()

    def tick(self, log_limit: int = LOG_TAIL) -> Frame:
        frame = super().tick(log_limit)
        hold = self.hold
        if hold is not None:
            self.hold = None
            self.inside.set()
            assert hold.wait(timeout=30)
        return frame


class _Frames(VramtopApp):
    """The console, its header's state line written down after each message it handles."""

    lines: list[str]

    def on_sample_arrived(self, message: SampleArrived) -> None:
        super().on_sample_arrived(message)
        self.lines.append(_state_line(self))

    def on_action_finished(self, message: ActionFinished) -> None:
        super().on_action_finished(message)
        self.lines.append(_state_line(self))


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_a_reading_taken_during_a_restart_is_not_drawn_after_it(
    size: tuple[int, int],
) -> None:
    backend = _HeldRead()
    app = _Frames(backend, NO_TIMER, clock=backend.clock)
    app.lines = []
    async with app.run_test(size=size) as pilot:
        await ticks(pilot, 1)
        await pilot.press("r", "r")
        for step in ("memory released", "launching", "loading weights"):
            await _step_shown(pilot, app, backend, step)
            if step != "loading weights":
                backend.go.release()
        # A read begins while the new server loads, and is held with its sample (starting) …
        held = threading.Event()
        backend.hold = held
        app.request_tick()
        assert backend.inside.wait(timeout=30)
        app.lines.clear()
        backend.go.release()  # … the restart ends (the server runs) …
        await wait_for(pilot, lambda: app.busy is None)
        held.set()  # … and the read taken before its end arrives after it.
        await settle(pilot)
        assert "● running" in _state_line(app) and "restarted" in _state_line(app)
        for line in app.lines:
            # Every frame: the action's own word, or the server's state once a reading taken
            # after the end says it, beside the outcome.
            assert "● starting" not in line, app.lines
            assert ("restarted" in line) == ("● running" in line), app.lines


class _Elsewhere(FakeBackend):
    """A server another process acts on (another terminal's `vramtop restart`, a guard, an
    automatic restart): its frames carry that process's action, as its action lock says it."""

    under_way: UnderWay | None = None

    def framed(self, sample: Sample, log_limit: int) -> Frame:
        return replace(super().framed(sample, log_limit), under_way=self.under_way)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_a_restart_from_another_process_says_restarting(size: tuple[int, int]) -> None:
    backend = _Elsewhere()
    app = make_app(backend)
    async with app.run_test(size=size) as pilot:
        await ticks(pilot, 1)
        backend.under_way = UnderWay("restart", pid=9999, since=backend.clock() - 12)
        for state in (ServerState.RUNNING, ServerState.STOPPED, ServerState.STARTING):
            backend.state = state
            await ticks(pilot, 1)
            line = _state_line(app)
            # Its own word and its seconds so far, as `vramtop status` says them.
            assert re.search(r"● restarting( pid \d+)? · \d+s so far", line), (state, line)
            for word in ("running", "stopped", "starting"):
                assert f"● {word}" not in line, (state, line)
        backend.under_way = None  # done: the server's own state
        backend.state = ServerState.RUNNING
        await ticks(pilot, 1)
        assert "● running" in _state_line(app)


class _Unread(_Paused):
    """Reads that, once the test says so, hang on an Event it holds (a slow or dead source:
    the sample never comes) or fail."""

    def __init__(self) -> None:
        super().__init__()
        self.hang: threading.Event | None = None
        self.inside = threading.Event()
        self.fail: str | None = None

    def tick(self, log_limit: int = LOG_TAIL) -> Frame:
        if self.fail is not None:
            raise RuntimeError(self.fail)
        hang = self.hang
        if hang is not None:
            self.inside.set()
            assert hang.wait(timeout=60)
        return super().tick(log_limit)


async def _restart_to_its_last_step(pilot: Pilot[int], app: VramtopApp, backend: _Paused) -> None:
    """r (twice: a request runs), its steps let go but the last, which waits for the test."""
    await ticks(pilot, 1)
    await pilot.press("r", "r")
    for step in ("memory released", "launching", "loading weights"):
        await _step_shown(pilot, app, backend, step)
        if step != "loading weights":
            backend.go.release()


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_a_restarts_outcome_is_said_while_the_reading_after_it_hangs(
    size: tuple[int, int],
) -> None:
    # The reading asked for at the end hung: "restarted" waited for it, and the person saw
    # "● restarting" with the last step's words as long as it hung.
    backend = _Unread()
    app = make_app(backend)
    async with app.run_test(size=size) as pilot:
        await _restart_to_its_last_step(pilot, app, backend)
        hang = backend.hang = threading.Event()
        try:
            backend.go.release()  # the restart ends; the reading asked at its end hangs
            await wait_for(pilot, lambda: app.busy is None and backend.inside.is_set())
            assert "● restarting" in _state_line(app)  # a moment for that reading first
            backend.t += OUTCOME_WAIT_S
            await wait_for(pilot, lambda: status_line(app) == "restarted", timeout=PROCESS_S)
            line = _state_line(app)
            # Not the state of the frame read while it ran ("● starting"), nor its own word.
            assert f"● {NOT_READ_YET}" in line and "restarted" in line, line
        finally:
            backend.hang = None
            hang.set()
        await settle(pilot)  # the reading comes at last: the state it read
        assert "● running" in _state_line(app) and status_line(app) == "restarted"


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_a_reading_that_fails_after_a_restart_is_said_after_its_outcome(
    size: tuple[int, int],
) -> None:
    # The reading asked for at the end failed: "reading failed" was said over "restarted",
    # which nobody saw.
    backend = _Unread()
    app = make_app(backend)
    async with app.run_test(size=size) as pilot:
        await _restart_to_its_last_step(pilot, app, backend)
        backend.fail = "the source went away"
        backend.go.release()
        await settle(pilot)
        failed = "reading failed (RuntimeError: the source went away)"
        for _ in range(2):  # and once more a second later: the outcome still leads
            assert status_line(app).startswith(f"restarted · {failed}"), status_line(app)
            line = _state_line(app)
            assert f"● {NOT_READ_YET}" in line and "● starting" not in line, line
            await ticks(pilot, 1)
        backend.fail = None
        await ticks(pilot, 1)
        assert "● running" in _state_line(app)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_an_automatic_restart_from_another_process_says_so(size: tuple[int, int]) -> None:
    backend = _Elsewhere()
    backend.state = ServerState.STARTING
    app = make_app(backend)
    async with app.run_test(size=size) as pilot:
        backend.under_way = UnderWay("restart", 9999, backend.clock() - 12, "auto_restart")
        await ticks(pilot, 1)
        line = _state_line(app)
        assert re.search(r"● restarting( pid \d+)? · \d+s so far", line), line
        if size[0] >= 120:  # (at 80 columns it gives way to the words beside it)
            assert "· automatic (the server had crashed)" in line, line
