"""The timeline opens at once: the profile's lasting events (two files of up to 5 MB) are read
in a thread and join the session's when read."""

from __future__ import annotations

import threading

from textual.app import App
from textual.widgets import DataTable, Label

from tests.support.waiting import PROCESS_S, wait_until_async
from vramtop.core.server_events import Event
from vramtop.tui.screens.timeline_screen import TimelineScreen


def rows(screen: TimelineScreen) -> list[str]:
    table = screen.query_one(DataTable)
    return [str(table.get_row_at(i)[1]) for i in range(table.row_count)]


async def test_a_slow_lasting_timeline_does_not_hold_the_screen_back() -> None:
    release = threading.Event()
    earlier = [Event(1_000.0, "relaunch", {"result": "ok"})]
    acted = [Event(2_000.0, "finding", {"kind": "vram_contention", "change": "opened"})]

    def slow_read() -> tuple[list[Event], list[Event]]:
        release.wait(PROCESS_S)
        return earlier, acted

    session = [Event(1.0, "start"), Event(30.0, "ready")]
    screen = TimelineScreen(session, actor="guard", lasting=slow_read)
    app: App[None] = App()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.push_screen(screen)
        await pilot.pause()
        # Shown while the read waits: the session's own events, and that the rest is coming.
        assert rows(screen) == ["start", "ready"]
        assert "reading the profile's earlier events" in str(
            screen.query_one("#timeline-empty", Label).content
        )
        screen.query_one(DataTable).move_cursor(row=1)  # on "ready"
        release.set()
        await wait_until_async(
            lambda: screen.lasting_read,
            deadline_s=PROCESS_S,
            what="the lasting timeline read",
            pause=pilot.pause,
        )
        await pilot.pause()
        assert rows(screen) == ["relaunch (earlier)", "finding (guard)", "start", "ready"]
        assert screen.query_one(DataTable).cursor_row == 3  # still on "ready"
        assert not screen.query_one("#timeline-empty").display


async def test_a_timeline_with_nothing_to_show_says_so_once_read() -> None:
    screen = TimelineScreen([], lasting=lambda: ([], []))
    app: App[None] = App()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.push_screen(screen)
        await wait_until_async(
            lambda: screen.lasting_read,
            deadline_s=PROCESS_S,
            what="the lasting timeline read",
            pause=pilot.pause,
        )
        await pilot.pause()
        label = screen.query_one("#timeline-empty", Label)
        assert str(label.content) == "No events yet in this session."
        assert not screen.query_one("#timeline-keys").display
