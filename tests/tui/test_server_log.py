"""The server log's cost follows what is on screen, not how much the server writes; repeated
lines fold into one row with a count."""

from __future__ import annotations

from textual.geometry import Region
from textual.pilot import Pilot
from textual.strip import Strip

from tests.support.console import distinct_lines, make_app, ticks
from tests.support.fake_backend import FakeBackend
from vramtop.machines.interface import LOG_TAIL
from vramtop.tui.screens.help_screen import HelpScreen
from vramtop.tui.widgets.console_header import ConsoleHeader
from vramtop.tui.widgets.kept_rows import COUNT_REDRAW_S
from vramtop.tui.widgets.row_strips import plain_text
from vramtop.tui.widgets.server_log import NO_OUTPUT, ServerLog
from vramtop.tui.widgets.tail_log import TailLog

ACCESS = 'INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def _count_draws(log: TailLog) -> list[str]:
    """The lines whose rows are styled and drawn anew from now on."""
    drawn: list[str] = []
    draw = log.strips.draw

    def counting(row, index, frame, selected=None):  # type: ignore[no-untyped-def]
        drawn.append(row.line)
        return draw(row, index, frame, selected)

    log.strips.draw = counting  # type: ignore[method-assign]
    return drawn


def _count_rows_rendered(log: TailLog) -> list[int]:
    """The rows Textual asks the log for from now on (each one it repaints)."""
    rendered: list[int] = []
    render_line = log.render_line

    def counting(y: int) -> Strip:
        rendered.append(y)
        return render_line(y)

    log.render_line = counting  # type: ignore[method-assign]
    return rendered


def _shown(log: TailLog) -> list[str]:
    rows = log.render_lines(Region(0, 0, log.size.width, log.size.height))
    return [strip.text.rstrip() for strip in rows]


async def test_a_burst_of_lines_draws_only_the_rows_on_screen() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        log = app.query_one(TailLog)
        drawn = _count_draws(log)
        burst = distinct_lines(250, "request")  # (the console reads a tail of 300)
        backend._log += burst
        await ticks(pilot, 1)
        await pilot.pause()
        rows = log.scrollable_content_region.height
        assert log.kept.texts[-len(burst) :] == burst  # every line is kept, to scroll to
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
        assert drawn == ["INFO a", "INFO b", "INFO c"]


async def _written_unseen(
    pilot: Pilot[int], backend: FakeBackend, log: TailLog, tag: str
) -> tuple[list[str], list[str]]:
    """Fifty lines written over two ticks while the log is out of sight: none is drawn or
    taken. The draws counted from now on, and the lines."""
    drawn = _count_draws(log)
    lines = distinct_lines(50, tag)
    backend._log += lines
    await ticks(pilot, 2)
    await pilot.pause()
    assert drawn == []
    assert lines[-1] not in log.kept.texts
    return drawn, lines


async def test_nothing_is_drawn_while_another_screen_covers_the_console() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        log = app.query_one(TailLog)
        await app.push_screen(HelpScreen(app.help_rows()))
        drawn, covered = await _written_unseen(pilot, backend, log, "while covered")
        app.pop_screen()
        await ticks(pilot, 1)
        await pilot.pause()
        assert log.kept.texts[-50:] == covered  # all of it, once back
        assert 0 < len(drawn) <= log.scrollable_content_region.height


async def test_nothing_is_drawn_while_a_small_terminal_leaves_the_log_out() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(60, 30)) as pilot:  # narrower than the log is shown at
        await ticks(pilot, 1)
        server_log = app.query_one(ServerLog)
        log = app.query_one(TailLog)
        assert not server_log.display
        drawn, hidden = await _written_unseen(pilot, backend, log, "while hidden")
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert server_log.display
        assert log.kept.texts[-50:] == hidden  # all of it, once shown, without waiting for a tick
        assert 0 < len(set(drawn) - {NO_OUTPUT}) <= log.scrollable_content_region.height


async def test_a_read_answered_while_the_console_closes_is_not_shown() -> None:
    # The reader's last sample can arrive once the console has begun to take its screen
    # down: the log is then no longer on any screen, and must not ask which one it is on.
    app = make_app(FakeBackend())
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        server_log = app.query_one(ServerLog)
        await server_log.remove()
        server_log.show(["INFO late"], now=10.0)
        assert "INFO late" not in server_log.lines


async def test_a_sample_shown_while_the_console_closes_does_not_stop_it() -> None:
    # The same late sample reaches the text panels (the header first): a panel taken off
    # its screen lays its rows out without asking the screen whether it is compact.
    app = make_app(FakeBackend())
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        header = app.query_one(ConsoleHeader)
        await header.remove()
        header.set_rows(["a late row"])
        assert [line.plain for line in header.lines] == ["a late row"]


async def test_control_characters_in_a_line_cannot_move_the_cursor() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        backend._log.append("INFO evil \x1b[2J\rline")
        await ticks(pilot, 1)
        shown = app.query_one(TailLog).kept.texts[-1]
        assert "\x1b" not in shown and "\r" not in shown
        assert shown.startswith("INFO evil") and shown.endswith("line")


async def test_a_search_from_a_scrolled_up_log_shows_its_matches() -> None:
    backend = FakeBackend()
    backend._log += [*distinct_lines(200, "line"), "INFO the needle", "INFO end"]
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        log = app.query_one(TailLog)
        log.scroll_to(y=100, animate=False)
        await pilot.pause()
        assert not log.following
        await pilot.press("slash", *"needle")
        await pilot.pause()
        assert log.kept.texts == ["INFO the needle"]
        assert "INFO the needle" in "".join(_shown(log))


async def test_repeated_lines_fold_into_one_row_with_the_newest_line_and_a_count() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        log = app.query_one(TailLog)
        before = len(log.kept.texts)
        backend._log += [ACCESS.format(port=40000 + i) for i in range(143)]
        await ticks(pilot, 1)
        await pilot.pause()
        assert log.kept.rows[before:] == [(ACCESS.format(port=40142), 143)]
        assert _shown(log)[before] == ACCESS.format(port=40142) + "  ×143"
        # A line of another kind is a row of its own, and the requests after it count again.
        backend._log += ["WARNING the scheduler is slow", ACCESS.format(port=1), "INFO done"]
        await ticks(pilot, 1)
        assert log.kept.rows[before:] == [
            (ACCESS.format(port=1), 144),  # in place: a line or two between do not split it
            ("WARNING the scheduler is slow", 1),
            ("INFO done", 1),
        ]
        # What is copied is what shows.
        log.text_select_all()
        await pilot.pause()
        copied = app.screen.get_selected_text() or ""
        assert ACCESS.format(port=1) + "  ×144" in copied.splitlines()


async def test_a_folded_row_wider_than_the_panel_keeps_its_count_in_view() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    wide = "(APIServer pid=4242) " + ACCESS  # wider than the panel at 80 columns
    async with app.run_test(size=(80, 30)) as pilot:
        backend._log += [wide.format(port=40000 + i) for i in range(12)]
        await ticks(pilot, 1)
        await pilot.pause()
        log = app.query_one(TailLog)
        row = _shown(log)[len(log.kept.texts) - 1 - round(log.scroll_y)]
        assert row.startswith("(APIServer pid=4242) INFO:     127.0.0.1:40011")
        assert row.endswith("  ×12")
        assert len(row) == log.scrollable_content_region.width


async def test_repeated_failures_fold_but_keep_their_colour_and_never_hide_what_came_between() -> (
    None
):
    backend = FakeBackend()
    app = make_app(backend)
    error = "ERROR 11-14 10:02:{s:02d} [core.py:812] request {s} failed: CUDA error"
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        log = app.query_one(TailLog)
        before = len(log.kept.texts)
        backend._log += [ACCESS.format(port=1), error.format(s=1), ACCESS.format(port=2)]
        backend._log += [error.format(s=s) for s in range(2, 6)]
        await ticks(pilot, 1)
        await pilot.pause()
        assert log.kept.rows[before:] == [
            (ACCESS.format(port=1), 1),
            (error.format(s=1), 1),
            (ACCESS.format(port=2), 1),  # not folded into the row above the error
            (error.format(s=5), 4),
        ]
        last = log.render_lines(Region(0, 0, log.size.width, log.size.height))[
            len(log.kept.texts) - 1 - round(log.scroll_y)
        ]
        assert last.text.rstrip().endswith("  ×4")
        failure = app.query_one(ServerLog).get_component_rich_style("server-log--failure")
        count = [segment for segment in last if "×4" in segment.text]
        assert count and all(segment.style and segment.style.bold for segment in count)
        assert failure.bold  # (the failure style is the one drawn: bold, the error colour)
        assert count[0].style is not None and count[0].style.color == failure.color


async def test_a_search_filters_the_raw_lines_then_folds_what_matches() -> None:
    backend = FakeBackend()
    backend._log += [
        "INFO answer 1 sent",
        "ERROR 11-14 10:02:11 [core.py:812] EngineCore hiccup",
        "INFO answer 2 sent",
    ]
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        log = app.query_one(TailLog)
        assert log.kept.rows[-3:] == [
            ("INFO answer 1 sent", 1),
            ("ERROR 11-14 10:02:11 [core.py:812] EngineCore hiccup", 1),
            ("INFO answer 2 sent", 1),
        ]
        await pilot.press("slash", *"answer")
        await pilot.pause()
        # The error between them is filtered out first: the two answers are one row.
        assert log.kept.rows == [("INFO answer 2 sent", 2)]


def _started() -> FakeBackend:
    """A server whose log already holds more than the panel shows: the panel follows its tail."""
    backend = FakeBackend()
    backend._log += distinct_lines(60, "startup")
    return backend


async def _a_request_row(pilot: Pilot[int], backend: FakeBackend) -> TailLog:
    """Three requests served: one row at the tail counts them. The log."""
    backend._log += [ACCESS.format(port=40000 + i) for i in range(3)]
    await ticks(pilot, 1)
    await pilot.pause()
    return pilot.app.query_one(TailLog)


async def test_a_frame_where_only_a_folded_row_grows_repaints_only_that_row() -> None:
    backend = _started()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        log = await _a_request_row(pilot, backend)
        assert log.scroll_y == log.max_scroll_y
        rendered = _count_rows_rendered(log)
        drawn = _count_draws(log)
        backend._log += [ACCESS.format(port=41000 + i) for i in range(20)]
        await ticks(pilot, 1)
        await pilot.pause()
        # Twenty more requests: the one row that counts them is repainted, nothing else moved.
        last = len(log.kept.texts) - 1 - round(log.scroll_y)
        assert log.kept.rows[-1] == (ACCESS.format(port=41019), 23)
        assert rendered == [last]
        assert drawn == [ACCESS.format(port=41019)]
        assert _shown(log)[last].endswith("  ×23")


async def test_under_steady_traffic_a_folded_count_is_drawn_at_most_every_few_seconds() -> None:
    backend = _started()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        log = await _a_request_row(pilot, backend)
        last = len(log.kept.texts) - 1 - round(log.scroll_y)
        rendered = _count_rows_rendered(log)
        repainted = []  # per tick (a second of the console's clock): was the row repainted?
        for second in range(8):
            backend._log += [ACCESS.format(port=41000 + 20 * second + i) for i in range(20)]
            await ticks(pilot, 1)
            await pilot.pause()
            repainted.append(rendered == [last])
            rendered.clear()
        # The first count after the quiet start at once, then one every COUNT_REDRAW_S.
        every = int(COUNT_REDRAW_S)
        assert every > 1
        assert repainted == [second % every == 0 for second in range(8)]
        # Traffic stops: the count held back is drawn when it is due, without a new line.
        due = (7 // every + 1) * every  # the first second a count is due after the last
        for _ in range(8, due):
            await ticks(pilot, 1)
            await pilot.pause()
            assert rendered == []
        await ticks(pilot, 1)
        await pilot.pause()
        assert rendered == [last]
        assert log.kept.rows[-1] == (ACCESS.format(port=41159), 163)
        assert _shown(log)[last].endswith("  ×163")


async def test_a_count_held_back_is_drawn_while_a_search_lets_no_new_line_through() -> None:
    backend = _started()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        app.query_one(ServerLog).set_query("POST")
        log = await _a_request_row(pilot, backend)
        last = len(log.kept.texts) - 1 - round(log.scroll_y)
        for port in (41000, 41001):  # drawn at once, then held back
            backend._log += [ACCESS.format(port=port)]
            await ticks(pilot, 1)
            await pilot.pause()
        rendered = _count_rows_rendered(log)
        # Requests stop; the server goes on writing lines the search leaves out.
        for second in range(int(COUNT_REDRAW_S) + 1):
            backend._log += [f"INFO: 127.0.0.1:5 - GET /health {second}"]
            await ticks(pilot, 1)
            await pilot.pause()
        assert rendered == [last]
        assert _shown(log)[last].endswith("  ×5")


async def test_a_repeated_failures_count_is_drawn_every_tick() -> None:
    backend = _started()
    error = "ERROR 11-14 10:02:{s:02d} [core.py:812] request {s} failed: CUDA error"
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        backend._log += [error.format(s=0)]
        await ticks(pilot, 1)
        await pilot.pause()
        log = app.query_one(TailLog)
        last = len(log.kept.texts) - 1 - round(log.scroll_y)
        rendered = _count_rows_rendered(log)
        for second in range(1, 4):
            backend._log += [error.format(s=second)]
            await ticks(pilot, 1)
            await pilot.pause()
            assert rendered == [last]
            assert log.kept.rows[-1][1] == second + 1
            rendered.clear()


def _busy() -> FakeBackend:
    """A server that has written its startup, then more requests than a tail holds."""
    backend = _started()
    backend._log += [ACCESS.format(port=40000 + i) for i in range(LOG_TAIL * 2)]
    return backend


async def test_a_console_opened_on_a_busy_server_shows_more_than_its_folded_requests() -> None:
    # Opened while an agent keeps the server busy: the last LOG_TAIL lines are all request
    # lines, one row. The first read brings what the backend keeps, so the rows before show.
    backend = _busy()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        log = app.query_one(TailLog)
        assert log.kept.rows[-1] == (ACCESS.format(port=40000 + LOG_TAIL * 2 - 1), LOG_TAIL * 2)
        assert len(log.kept.rows) > log.size.height  # the startup's rows above it fill the panel
        backend._log += [ACCESS.format(port=41000)]
        await ticks(pilot, 1)
        assert log.kept.rows[-1][1] == LOG_TAIL * 2 + 1  # and the next read's tail continues it


async def test_a_line_written_many_times_over_keeps_counting_as_the_tail_moves() -> None:
    # One client on one connection: the same request line, word for word, again and again,
    # between the server's stats lines.
    same = ACCESS.format(port=56528)
    stats = "INFO 12-01 06:10:{s:02d} [loggers.py:335] Engine 000: Running: 2 reqs"
    backend = FakeBackend()
    for second in range(40):  # more than the tail the console reads
        backend._log += [same] * 10 + [stats.format(s=second)]
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        log = app.query_one(TailLog)
        counted = dict(log.kept.rows)[same]
        for _ in range(3):
            backend._log += [same] * 7
            await ticks(pilot, 1)
        # Each tick's tail continues the last one: the seven new lines are counted, none
        # twice, and the rows are not rebuilt from the tail held (which counts its own only).
        assert dict(log.kept.rows)[same] == counted + 21


async def test_rows_are_drawn_as_textuals_strip_operations_would_draw_them() -> None:
    # The rows that fit are made in one go; each must be what Textual's own steps make of the
    # styled line: styled, padded to the panel's width, each cell marked with its place.
    backend = FakeBackend()
    error = "ERROR 11-14 10:02:{s:02d} [core.py:812] request {s} failed: CUDA error"
    backend._log += [
        *[ACCESS.format(port=40000 + i) for i in range(3)],
        *[error.format(s=s) for s in range(2)],
        "INFO 全角の行 wide characters",
        "INFO " + "x" * 200,  # wider than the panel
        "INFO plain",
    ]
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        await pilot.pause()
        log = app.query_one(TailLog)
        styled = app.query_one(ServerLog)._styled
        style, width = log.visual_style.rich_style, log.scrollable_content_region.width
        top = round(log.scroll_y)
        strips = [log.render_line(y) for y in range(log.size.height)]  # (before Textual's filters)
        shown = log.kept.folded[top : top + len(strips)]
        assert [row.count for row in shown][-5:] == [3, 2, 1, 1, 1]
        for index, (row, strip) in enumerate(zip(shown, strips, strict=False), start=top):
            text = styled(row) or plain_text(row)  # (None: nothing of its own to style)
            expected = (
                Strip(text.render(app.console), text.cell_len)
                .apply_style(style)
                .crop_extend(0, width, style)
                .apply_offsets(0, index)
            )
            if text.cell_len <= width:
                assert list(strip) == list(expected)
            assert strip.cell_length == width
            assert strip.text == expected.text


async def test_a_search_cleared_on_a_busy_server_shows_the_rows_before_the_requests_again() -> None:
    backend = _busy()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 2)  # the first read brought every line kept, the second a tail
        log = app.query_one(TailLog)
        rows = log.kept.rows
        assert len(rows) > log.size.height
        await pilot.press("slash", *"startup")
        await pilot.pause()
        assert len(log.kept.rows) == 60  # the search covers every line kept, not a tail
        await pilot.press("escape")
        await pilot.pause()
        assert log.kept.rows == rows


async def test_a_log_that_does_not_continue_the_panel_is_rebuilt_from_every_line_kept() -> None:
    # More lines in a second than a tail holds (or a rotated log): the tail read does not
    # continue the rows shown. They are built anew from what the backend keeps.
    backend = _busy()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 2)
        log = app.query_one(TailLog)
        backend._log += distinct_lines(10, "burst") + [
            ACCESS.format(port=50000 + i) for i in range(LOG_TAIL + 10)
        ]
        await ticks(pilot, 2)
        assert log.kept.rows[-1] == (ACCESS.format(port=50000 + LOG_TAIL + 9), LOG_TAIL + 10)
        assert [line for line, _ in log.kept.rows[-12:-1]] == [
            ACCESS.format(port=40000 + LOG_TAIL * 2 - 1),
            *distinct_lines(10, "burst"),
        ]
        backend._log += [ACCESS.format(port=51000)]
        await ticks(pilot, 1)  # later reads take a tail again, and continue the rows
        assert log.kept.rows[-1][1] == LOG_TAIL + 11
