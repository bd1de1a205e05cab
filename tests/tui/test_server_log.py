"""The server log's cost follows what is on screen, not how much the server writes."""

from __future__ import annotations

from textual.geometry import Region

from tests.support.console import make_app, ticks
from tests.support.fake_backend import FakeBackend
from vramtop.tui.screens.help_screen import HelpScreen
from vramtop.tui.widgets.server_log import TailLog


def _count_draws(log: TailLog) -> list[int]:
    drawn: list[int] = []
    draw = log._draw

    def counting(index, style, selected=None):  # type: ignore[no-untyped-def]
        drawn.append(index)
        return draw(index, style, selected)

    log._draw = counting  # type: ignore[method-assign]
    return drawn


async def test_a_burst_of_lines_draws_only_the_rows_on_screen() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        log = app.query_one(TailLog)
        drawn = _count_draws(log)
        backend._log += [f"INFO request {i} finished" for i in range(400)]
        await ticks(pilot, 1)
        await pilot.pause()
        rows = log.scrollable_content_region.height
        assert log.texts[-1] == "INFO request 399 finished"  # every line is kept, to scroll to
        assert 0 < len(drawn) <= rows  # but only what shows was drawn
        assert log.scroll_y == log.max_scroll_y

        # A quiet second draws nothing again: what shows is kept while it stays on screen.
        drawn.clear()
        await ticks(pilot, 1)
        await pilot.pause()
        assert drawn == []

        # Three new lines scroll the log by three: three rows are new, the rest are kept.
        backend._log += ["INFO a", "INFO b", "INFO c"]
        await ticks(pilot, 1)
        await pilot.pause()
        assert sorted(drawn)[-3:] == [len(log.texts) - 3, len(log.texts) - 2, len(log.texts) - 1]
        assert len(drawn) == 3


async def test_nothing_is_drawn_while_another_screen_covers_the_console() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        log = app.query_one(TailLog)
        await app.push_screen(HelpScreen(app.help_rows()))
        drawn = _count_draws(log)
        backend._log += [f"INFO while covered {i}" for i in range(50)]
        await ticks(pilot, 2)
        await pilot.pause()
        assert drawn == []
        assert "INFO while covered 49" not in log.texts
        app.pop_screen()
        await ticks(pilot, 1)
        await pilot.pause()
        assert log.texts[-1] == "INFO while covered 49"  # all of it, once back
        assert 0 < len(drawn) <= log.scrollable_content_region.height


async def test_control_characters_in_a_line_cannot_move_the_cursor() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        backend._log.append("INFO evil \x1b[2J\rline")
        await ticks(pilot, 1)
        shown = app.query_one(TailLog).texts[-1]
        assert "\x1b" not in shown and "\r" not in shown
        assert shown.startswith("INFO evil") and shown.endswith("line")


async def test_a_search_from_a_scrolled_up_log_shows_its_matches() -> None:
    backend = FakeBackend()
    backend._log += [f"INFO line {i}" for i in range(200)] + ["INFO the needle", "INFO end"]
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        log = app.query_one(TailLog)
        log.scroll_to(y=100, animate=False)
        await pilot.pause()
        assert not log.following
        await pilot.press("slash", *"needle")
        await pilot.pause()
        assert log.texts == ["INFO the needle"]
        rows = log.render_lines(Region(0, 0, log.size.width, log.size.height))
        assert "INFO the needle" in "".join(strip.text for strip in rows)
