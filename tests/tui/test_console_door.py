"""The console behind a front door (Pilot): the throughput panel's door line, the holding
line, no line without a door; `r` restarts at once without asking, saying that the door holds
the agent's requests, where a server with no door still asks for a second `r`."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.support.console import make_app, settle, status_line, ticks
from tests.support.fake_backend import FakeBackend
from tests.support.waiting import PROCESS_S, wait_until_async
from vramtop.core.diagnosis.throughput import ThroughputView
from vramtop.core.model import DoorReading, Sample, ServerState
from vramtop.core.server_events import Event
from vramtop.machines.demo_backend import demo_backend
from vramtop.machines.demo_world import stop_demo_world
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.settings import Settings
from vramtop.tui.app import VramtopApp
from vramtop.tui.widgets.console_header import ConsoleHeader
from vramtop.tui.widgets.throughput_panel import DoorRow, ThroughputPanel

ADDRESS = "127.0.0.1:8000"
EACH_TPS = 52.4  # the per-request decode speed of the frame's throughput view
SEEN = DoorReading(
    address=ADDRESS,
    in_flight=2,
    held=0,
    served=40,
    longest_hold_s=0.0,
    ttft_p50_s=0.21,
    ttft_p95_s=0.8,
    e2e_p50_s=3.1,
    e2e_p95_s=6.0,
    decode_tps_p50=47.0,  # the clients' p50 over answered requests: not the line's figure
)


class DoorBackend(FakeBackend):
    """The fake machine behind a front door (or, with `address` None, without one) whose
    door reports `door` each tick; a restart waits for `release` once it has begun."""

    def __init__(self, address: str | None = ADDRESS, door: DoorReading | None = SEEN) -> None:
        super().__init__()
        self.address = address
        self.door = door
        self.release = threading.Event()
        self.release.set()

    @property
    def front_door(self) -> str | None:
        return self.address

    def next_sample(self) -> Sample:
        return replace(super().next_sample(), door=self.door)

    def throughput(self) -> ThroughputView | None:
        # The diagnosis judged each request at 52.4 tok/s this second: the door line's figure.
        view = super().throughput()
        return None if view is None else replace(view, per_request_tps=EACH_TPS)

    def restart(
        self, progress: ProgressCallback | None = None, requests_lost: bool = False
    ) -> ActionResult:
        self.release.wait(10)
        return super().restart(progress, requests_lost)


def shown(app: VramtopApp, widget: Any) -> str:
    rendered: Any = app.screen.query_one(widget).render()
    return str(getattr(rendered, "plain", rendered))


async def test_the_throughput_panel_says_what_the_door_sees() -> None:
    backend = DoorBackend()
    app = make_app(backend)
    async with app.run_test(size=(160, 48)) as pilot:
        await ticks(pilot, 2)
        panel = shown(app, ThroughputPanel)
        line = "door: 2 in flight · TTFT 0.21/0.80 s · e2e 3.1/6.0 s · 52 tok/s/req"
        assert line in panel, panel
        # A restart begins: the door holds new requests while those in flight finish.
        backend.door = replace(SEEN, holding=True)
        await ticks(pilot, 1)
        assert "door: 2 in flight · holding new requests" in shown(app, ThroughputPanel)
        # A restart under way: the door holds three requests, the longest for 8 s.
        backend.door = replace(SEEN, holding=True, held=3, in_flight=0, longest_hold_s=8.4)
        await ticks(pilot, 1)
        panel = shown(app, ThroughputPanel)
        assert "door: holding 3 (longest 8 s)" in panel, panel
        assert "in flight" not in panel
        # The door stops answering: its line goes, the rest of the panel stays.
        backend.door = None
        await ticks(pilot, 1)
        panel = shown(app, ThroughputPanel)
        assert "door:" not in panel and "generation" in panel


@pytest.mark.parametrize(
    ("width", "line"),
    [
        # The panel at 200 columns: every figure, p50 and p95 named.
        (
            96,
            "door: 2 in flight · TTFT p50 0.21 s p95 0.80 s · e2e p50 3.1 s p95 6.0 s"
            " · 52 tok/s/req · held 0",
        ),
        (76, "door: 2 in flight · TTFT 0.21/0.80 s · e2e 3.1/6.0 s · 52 tok/s/req"),  # 160
        (56, "door: 2 in flight · TTFT 0.21 s · e2e 3.1 s · 52/req"),  # 120 columns
        (36, "door: 2 in flight · TTFT 0.21 s"),  # 80 columns
        (20, "door: 2 in flight"),
    ],
)
def test_the_door_line_drops_detail_as_the_panel_narrows(width: int, line: str) -> None:
    # End-to-end p95 and the per-request decode speed are told beside TTFT; narrower,
    # the p95s go first, then the end-to-end latency and the speed.
    assert DoorRow(SEEN, EACH_TPS).draw(width).plain == line


def test_a_door_with_nothing_measured_yet_says_so_in_each_figure() -> None:
    door = DoorReading(address=ADDRESS, in_flight=1)
    line = "door: 1 in flight · TTFT —/— s · e2e —/— s · — tok/s/req"
    assert DoorRow(door).draw(56).plain == line


async def test_a_narrow_panel_keeps_the_door_line_on_one_row() -> None:
    app = make_app(DoorBackend())
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 2)
        panel = app.screen.query_one(ThroughputPanel)
        width = panel.content_region.width
        rows = [row for row in shown(app, ThroughputPanel).splitlines() if "door:" in row]
        assert len(rows) == 1 and len(rows[0].rstrip()) <= width, rows
        assert rows[0].startswith("door: 2 in flight")


async def test_without_a_door_the_panel_has_no_door_line() -> None:
    app = make_app(FakeBackend())
    async with app.run_test(size=(160, 48)) as pilot:
        await ticks(pilot, 2)
        assert "door:" not in shown(app, ThroughputPanel)


DOOR_RESTARTED = {"front_door": ADDRESS, "message": "the front door had died; it was started again"}


async def test_a_door_started_again_is_said_once_on_the_status_line() -> None:
    backend = DoorBackend()
    app = make_app(backend)
    said = "the front door had died; it was started again (127.0.0.1:8000)"
    async with app.run_test(size=(120, 30)) as pilot:
        await ticks(pilot, 2)
        assert said not in shown(app, ConsoleHeader)
        # Housekeeping found the door dead and started it again: the timeline's event.
        backend._events.append(Event(backend.t, "door_restarted", DOOR_RESTARTED))
        await ticks(pilot, 1)
        assert said in shown(app, ConsoleHeader), shown(app, ConsoleHeader)
        # Said once: the same event in the frames that follow does not say it again.
        app.say("something else")
        await ticks(pilot, 2)
        assert said not in shown(app, ConsoleHeader)
        # The door dies again: a new event, said again.
        backend._events.append(Event(backend.t, "door_restarted", DOOR_RESTARTED))
        await ticks(pilot, 1)
        assert said in shown(app, ConsoleHeader)


async def test_a_door_started_again_as_a_restart_ends_is_said_after_its_outcome() -> None:
    # Both came with the restart's reading: the door's words were said over "restarted".
    backend = DoorBackend()
    backend.release.clear()
    app = make_app(backend)
    async with app.run_test(size=(120, 30)) as pilot:
        await ticks(pilot, 3)
        await pilot.press("r")
        await pilot.pause()
        backend._events.append(Event(backend.t, "door_restarted", DOOR_RESTARTED))
        backend.release.set()
        await settle(pilot)
        assert status_line(app) == (
            "restarted · the front door had died; it was started again (127.0.0.1:8000)"
        )


async def test_r_behind_a_door_restarts_at_once_and_says_the_door_holds() -> None:
    backend = DoorBackend()
    backend.release.clear()  # the restart waits: what the header says meanwhile is seen
    app = make_app(backend)
    async with app.run_test(size=(120, 30)) as pilot:
        await ticks(pilot, 3)  # requests run (the fake's metrics say so)
        await pilot.press("r")
        await pilot.pause()
        header = shown(app, ConsoleHeader)
        assert "restart: the front door holds the agent's requests" in header, header
        assert "press r again" not in header and "request(s) running" not in header
        backend.release.set()
        await settle(pilot)
        # One `r` was enough, and the restart was not told that requests would be lost.
        assert backend.calls == [("restart",)]


async def test_r_without_a_door_still_asks_for_a_second_r() -> None:
    backend = DoorBackend(address=None, door=None)
    app = make_app(backend)
    async with app.run_test(size=(120, 30)) as pilot:
        await ticks(pilot, 3)
        await pilot.press("r")
        await pilot.pause()
        header = shown(app, ConsoleHeader)
        assert "request(s) running: press r again to restart" in header, header
        assert backend.calls == []
        await pilot.press("r")
        await settle(pilot)
        assert backend.calls == [("restart", "requests lost")]


@pytest.mark.slow
async def test_the_demo_behind_its_door_shows_the_doors_line_and_restarts_on_one_r(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The real simulated machine, its real door process and its agent sending through it.
    pytest.importorskip("aiohttp")
    monkeypatch.setenv("VRAMTOP_SIM_STARTUP_S", "0.3")
    backend, _ = demo_backend(wsl=False)
    try:
        app = VramtopApp(backend, Settings(interval_s=0.25))
        async with app.run_test(size=(160, 48)) as pilot:

            def seen(what: Callable[[], bool], timeout_s: float = PROCESS_S) -> Awaitable[None]:
                return _until(pilot, what, timeout_s)

            await seen(lambda: app.sample is not None and app.sample.door is not None)
            assert backend.front_door is not None
            assert app.sample is not None and app.sample.door is not None
            assert app.sample.door.address == backend.front_door
            await seen(lambda: "door: " in shown(app, ThroughputPanel))
            await seen(lambda: app.sample is not None and _served(app.sample) >= 1)

            def running() -> bool:
                info = app.sample.info if app.sample else None
                return info is not None and info.state is ServerState.RUNNING and not app.busy

            await seen(running)
            before = len([e for e in backend.session.events() if e.name == "restart"])
            await pilot.press("r")  # once: behind the door nothing is asked
            await pilot.pause()
            assert "press r again" not in shown(app, ConsoleHeader)
            await seen(
                lambda: len([e for e in backend.session.events() if e.name == "restart"]) > before
            )
            # (a door slow to answer under load is not asked for a few ticks: its reading is
            # then None, the door's line alone goes without; the first one after is asserted)
            await seen(
                lambda: running() and app.sample is not None and app.sample.door is not None, 60.0
            )
            door_now = app.sample.door if app.sample else None
            assert door_now is not None and door_now.failed == 0, door_now
    finally:
        backend.close(stop_server=True)  # its housekeeping too (`closed_at_end`)
        stop_demo_world()


def _served(sample: Sample) -> int:
    return sample.door.served if sample.door is not None else 0


async def _until(pilot: Pilot[int], what: Callable[[], bool], timeout_s: float) -> None:
    await wait_until_async(
        what, deadline_s=timeout_s, what="(see the line above)", pause=pilot.pause, poll_s=0.1
    )
