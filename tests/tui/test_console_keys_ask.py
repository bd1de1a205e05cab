"""Keys that say what they did: r on a stopped server starts it and says so; s with requests
running asks as r does (behind a front door, says the door lets them finish)."""

from __future__ import annotations

import threading

from tests.support.console import make_app, settle, text, ticks
from tests.support.fake_backend import FakeBackend
from vramtop.core.model import ServerState
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.tui.app import VramtopApp
from vramtop.tui.widgets.console_header import ConsoleHeader


class Held(FakeBackend):
    """A start and a stop that wait for `release`: the status line is read while they run."""

    def __init__(self, door: str | None = None) -> None:
        super().__init__()
        self.door_address = door
        self.release = threading.Event()

    @property
    def front_door(self) -> str | None:
        return self.door_address

    def start(self, progress: ProgressCallback | None = None) -> ActionResult:
        self.release.wait(30)
        return super().start(progress)

    def stop(self, progress: ProgressCallback | None = None) -> ActionResult:
        self.release.wait(30)
        return super().stop(progress)


def _header(app: VramtopApp) -> str:
    return text(app, ConsoleHeader)


async def test_r_on_a_stopped_server_starts_it_and_says_so() -> None:
    backend = Held()
    backend.state = ServerState.STOPPED
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 2)
        await pilot.press("r")
        await pilot.pause()
        assert "the server was stopped: starting it" in _header(app)
        backend.release.set()
        await settle(pilot)
        assert backend.calls == [("start",)]
        assert "started" in _header(app)


async def test_s_with_requests_running_asks_before_it_stops() -> None:
    backend = FakeBackend()  # one request running
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 2)
        await pilot.press("s")
        await settle(pilot)
        assert backend.calls == []
        assert "1 request(s) running: press s again to stop" in _header(app)
        await pilot.press("s")
        await settle(pilot)
        assert backend.calls == [("stop",)]


async def test_s_behind_a_front_door_says_the_door_lets_them_finish() -> None:
    backend = Held(door="127.0.0.1:18099")
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 2)
        await pilot.press("s")  # once: nothing is lost, nothing to ask
        await pilot.pause()
        assert "stop: the door lets the requests finish" in _header(app)
        backend.release.set()
        await settle(pilot)
        assert backend.calls == [("stop",)]
