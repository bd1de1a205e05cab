"""While an action runs, the header's state word is the action's own ("● restarting"): the
server's state moves through stopped and starting meanwhile, and "● stopped" beside
"restart: launching…" (or "● running" beside "restart: memory released…") read apart."""

from __future__ import annotations

import threading

import pytest
from textual.pilot import Pilot

from tests.support.console import make_app, settle, text, ticks, wait_for
from tests.support.fake_backend import FakeBackend
from vramtop.core.model import ServerState
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.tui.app import VramtopApp
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
