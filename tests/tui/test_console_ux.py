"""What a newcomer meets: every way out asks the same question (only where there is one),
the banner in words, one list of themes, whole events, a status line that says things once."""

from __future__ import annotations

from conftest import make_app, settle, ticks
from fake_backend import FakeBackend
from test_console_app import start_a_call_and_let_it_collapse, text
from textual.widgets import DataTable

from vramtop.core.model import ServerState
from vramtop.tui.commands import ConsoleThemes
from vramtop.tui.screens.quit_dialog import QuitDialog
from vramtop.tui.screens.timeline_screen import EventScreen, TimelineScreen
from vramtop.tui.widgets.console_header import ConsoleHeader
from vramtop.tui.widgets.finding_banner import banner_text
from vramtop.tui.widgets.throughput_panel import SMOOTH_SAMPLES, shown_rate


async def test_ctrl_q_and_the_palettes_quit_ask_like_q() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        titles = [command.title for command in app.get_system_commands(app.screen)]
        assert "Quit" not in titles  # Textual's own: the palette keeps "Quit vramtop"
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert isinstance(app.screen, QuitDialog)
        await pilot.press("ctrl+q")  # a second one does not stack another question
        await pilot.pause()
        assert len(app.screen_stack) == 2
        await pilot.press("escape")
        await app.run_action("quit")  # what the palette's Textual "Quit" runs
        await pilot.pause()
        assert isinstance(app.screen, QuitDialog)
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running and backend.calls == []


async def test_leaving_vllm_running_says_where_and_how_to_stop_it() -> None:
    backend = FakeBackend(demo=False)
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("q", "enter")
        await settle(pilot)
    assert backend.closed_with is False
    assert app.farewell == (
        "vLLM is still running (pid 4242) at http://127.0.0.1:8000. "
        "To stop it: vramtop stop --profile qwen-27b"
    )


async def test_the_demo_left_running_is_stopped_with_demo() -> None:
    app = make_app(FakeBackend(demo=True))
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("q", "l")
        await settle(pilot)
    assert app.farewell is not None and app.farewell.endswith("vramtop stop --demo")


async def test_q_without_a_server_quits_without_asking() -> None:
    backend = FakeBackend(demo=False)
    backend.state = ServerState.STOPPED
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("q")
        await settle(pilot)
        assert not isinstance(app.screen, QuitDialog)
    assert backend.closed_with is False and app.farewell is None


async def test_watching_only_q_quits_and_stops_nothing() -> None:
    # A URL or a recording: there is nothing vramtop could stop, so nothing is offered.
    backend = FakeBackend(demo=False)
    backend.can_act = False  # type: ignore[attr-defined]
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("q")
        await settle(pilot)
        assert not isinstance(app.screen, QuitDialog)
    assert backend.calls == [("close", False)]
    assert app.farewell is None


async def test_the_palette_and_t_offer_the_same_themes() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        names = app.theme_names
        assert "vramtop-dark" in names and "textual-dark" not in names
        provider = ConsoleThemes(app.screen)
        listed = [str(hit.display) async for hit in provider.discover()]
        assert tuple(listed) == names
        cycled = []
        for _ in names:
            await pilot.press("t")
            cycled.append(app.theme)
        assert sorted(cycled) == sorted(names)


async def test_enter_on_a_timeline_row_shows_the_whole_event() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await start_a_call_and_let_it_collapse(pilot)
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, TimelineScreen)
        table = app.screen.query_one(DataTable)
        rows = [table.get_row_at(i)[1] for i in range(table.row_count)]
        table.move_cursor(row=rows.index("finding"))
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, EventScreen)
        shown = " ".join(text(app, "#event").split())
        # The whole summary, which a row at 80 columns cuts.
        assert "the desktop is squeezing vLLM." in shown
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, TimelineScreen)


async def test_a_finished_start_is_said_once() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(120, 30)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("r", "r")
        await settle(pilot)
        header = text(app, ConsoleHeader)
        assert "restarted" in header
        assert header.count("4343") == 1  # the pid: in the header's own words only


def test_the_rate_shown_rides_over_pauses_between_requests() -> None:
    # An agent's requests with pauses between them: 82 while generating, nothing between,
    # and a second in which a request ended halfway.
    history = (82.0, 0.0, 29.0, 82.0, 0.0)
    assert shown_rate(0.0, history) == (82 + 29 + 82) / 3
    assert shown_rate(None, history) is None  # not known now: "—"
    idle = (82.0,) + (0.0,) * SMOOTH_SAMPLES
    assert shown_rate(0.0, idle) == 0.0  # idle for a while: it says so


def test_a_finding_without_a_normal_rate_says_so_in_the_compact_banner() -> None:
    finding = {
        "kind": "vram_contention",
        "summary": "Generation fell to 9 tok/s with the card full.",
        "confidence": "low",
        "remedy": {"gpu_memory_utilization": 0.84},
    }
    first = banner_text(finding).plain.splitlines()[0]
    assert first == "⚠ The desktop is squeezing vLLM's memory  (low confidence)"
    sure = banner_text({**finding, "confidence": "high"}).plain.splitlines()[0]
    assert "confidence" not in sure
