"""The console through Pilot on the fake backend: numbers shown, keys acting, trouble handled."""

from __future__ import annotations

import gc
import inspect
import sys
import threading
from dataclasses import replace
from typing import Any

import pytest
from textual.app import App
from textual.events import MouseScrollUp
from textual.geometry import Region
from textual.widgets import Input

from tests.support.console import (
    distinct_lines,
    make_app,
    open_budget_dialog,
    settle,
    start_a_call_and_let_it_collapse,
    text,
    ticks,
    toggle_call,
)
from tests.support.fake_backend import FakeBackend
from tests.support.waiting import PROCESS_S, wait_until_async
from vramtop.core.model import Sample
from vramtop.settings import Settings
from vramtop.tui import app as app_module
from vramtop.tui import reader as reader_module
from vramtop.tui.screens.budget_dialog import BudgetDialog
from vramtop.tui.screens.headroom_screen import HeadroomScreen
from vramtop.tui.screens.help_screen import HelpScreen
from vramtop.tui.screens.timeline_screen import TimelineScreen
from vramtop.tui.widgets.console_header import ConsoleHeader
from vramtop.tui.widgets.finding_banner import FindingBanner
from vramtop.tui.widgets.kv_pool_panel import KvPoolPanel
from vramtop.tui.widgets.server_log import ServerLog
from vramtop.tui.widgets.tail_log import TailLog
from vramtop.tui.widgets.text_panel import SPARK_BLOCKS
from vramtop.tui.widgets.throughput_panel import ThroughputPanel


async def test_panels_show_the_backends_numbers() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 3)
        header = text(app, ConsoleHeader)
        assert "RTX 5090 31.8 GiB" in header
        assert "WSL2" in header and "vLLM 0.29.0" in header
        assert "pid 4242" in header and "budget 0.93" in header
        assert "up 1h02m" in header  # fixed clock: started 3725 s before, 3 ticks ago
        vram = text(app, "VramSplitPanel")
        assert "budget 0.93 × total = 29.6 GiB" in vram
        assert "leaves the desktop 1.8 GiB" in vram
        assert "derived" not in vram or "WSL2 gives no per-process numbers" in vram
        kv = text(app, "KvPoolPanel")
        assert "9.26 GiB" in kv and "1.85× at 163,840" in kv
        throughput = text(app, "ThroughputPanel")
        assert "normal 77" in throughput and "1 running" in throughput


async def test_native_linux_lists_top_processes() -> None:
    app = make_app(FakeBackend(wsl=False))
    async with app.run_test(size=(120, 30)) as pilot:
        await ticks(pilot, 1)
        assert "VLLM::EngineCore (4242)" in text(app, "VramSplitPanel")
        assert "native Linux" in text(app, ConsoleHeader)


async def test_r_asks_once_while_requests_run_then_restarts_with_a_new_pid() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 2)
        await pilot.press("r")
        await settle(pilot)
        assert backend.calls == []
        assert "press r again" in text(app, ConsoleHeader)
        await pilot.press("r")
        await settle(pilot)
        # Confirmed with requests running: they are lost, the stop need not wait for them.
        assert backend.calls == [("restart", "requests lost")]
        header = text(app, ConsoleHeader)
        assert "pid 4343" in header and "pid 4242" not in header
        assert "restarted" in header


async def test_b_minus_eight_times_enter_relaunches_at_085() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 2)
        await pilot.press("b")
        assert isinstance(app.screen, BudgetDialog)
        assert app.screen.value_text == "0.93"
        await pilot.press(*["minus"] * 8)
        assert app.screen.value_text == "0.85"
        prediction = text(app, "#budget-prediction")
        assert "desktop headroom" in prediction
        assert "frees 2.55 GiB for the desktop, costs 83,472 KV tokens against 0.93" in prediction
        await pilot.press("enter")
        await settle(pilot)
        assert backend.calls == [("relaunch", 0.85)]
        assert "budget 0.85" in text(app, ConsoleHeader)


async def test_budget_dialog_refuses_invalid_values_in_place() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("b")
        field = app.screen.query_one("#budget-value", Input)
        for value, reason in [("1.5", "at most 1"), ("abc", "type a number"), ("0.50", "weights")]:
            field.value = value
            await pilot.pause()
            assert reason in text(app, "#budget-reason")
            await pilot.press("enter")
            assert isinstance(app.screen, BudgetDialog)
        await pilot.press("escape")
        await settle(pilot)
        assert backend.calls == []


async def test_q_leaves_the_server_running_by_default() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("q")
        await pilot.press("enter")
        await settle(pilot)
    assert backend.closed_with is False
    assert app.return_value == 0


async def test_q_then_s_stops_the_server() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("q")
        await pilot.press("s")
        await settle(pilot)
    assert backend.closed_with is True


async def test_crashed_server_is_named_and_the_rest_keeps_updating() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 2)
        backend.crash()
        await ticks(pilot, 1)
        assert "crashed" in text(app, ConsoleHeader)
        banner = text(app, FindingBanner)
        assert "vLLM went down without being asked to" in banner and "r restart now" in banner
        assert app.query_one(ServerLog).border_subtitle.startswith("vLLM exited")
        assert "connection refused" in text(app, "KvPoolPanel")
        assert "vLLM 0.0" in text(app, "VramSplitPanel")  # the GPU panel still updates
        assert app.check_action("restart", ()) is True


@pytest.mark.parametrize(
    ("source", "error", "advice", "not_said"),
    [
        # The real card: check the driver.
        ("nvml", "NVML library not found (libnvidia-ml.so.1)", "nvidia-smi", None),
        # The demo's simulated GPU has stopped: there is no driver to check.
        (
            "sim",
            "simulated GPU not reachable: gpu.sock: connection refused",
            "vramtop --demo --wsl again",
            "nvidia-smi",
        ),
        # A replay whose recording has no GPU reading here: nothing to check on this machine.
        (
            "recording",
            "the recording has no GPU reading at this point",
            "nothing to check on this one",
            "nvidia-smi",
        ),
    ],
)
async def test_missing_gpu_readings_are_explained_and_other_panels_update(
    source: str, error: str, advice: str, not_said: str | None
) -> None:
    backend = FakeBackend()
    backend.nvml_error = error
    backend.gpu_source = source
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 2)
        vram = text(app, "VramSplitPanel")
        assert f"GPU readings unavailable: {error}" in vram
        assert advice in vram
        if not_said is not None:
            assert not_said not in vram
        assert "9.26 GiB" in text(app, "KvPoolPanel")


@pytest.mark.parametrize(
    ("profile", "wsl", "command"),
    [
        ("demo-spark", False, "vramtop --demo --card spark again"),
        ("demo-r9700", False, "vramtop --demo --card r9700 again"),
        ("demo", True, "vramtop --demo --wsl again"),
        ("demo", False, "vramtop --demo --card 5090 again"),
    ],
)
async def test_a_stopped_simulated_machine_names_the_command_that_brings_it_back(
    profile: str, wsl: bool, command: str
) -> None:
    """The same options the quit farewell's stop command gives: pasted, they name this
    machine, whatever else runs."""
    backend = FakeBackend(profile_name=profile, wsl=wsl)
    backend.nvml_error = "simulated GPU not reachable: gpu.sock: connection refused"
    backend.gpu_source = "sim"
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 2)
        assert command in " ".join(text(app, "VramSplitPanel").split())


async def test_stale_metrics_are_marked() -> None:
    backend = FakeBackend()
    backend.metrics_error = "timed out after 2 s"
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        assert "(stale)" in text(app, "KvPoolPanel")


async def test_simulated_call_collapses_and_the_banner_offers_the_remedy() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await start_a_call_and_let_it_collapse(pilot)
        assert backend.call_on
        assert "call on" in text(app, ConsoleHeader)
        banner = text(app, FindingBanner)
        # Compact: the headline in words, one line of evidence, the remedy keys.
        assert banner.startswith("⚠ The desktop is squeezing vLLM's memory")
        assert len(banner.splitlines()) == 3
        assert "observed:" not in banner and "vram_contention" not in banner
        assert "b relaunch at 0.85" in banner and "d details" in banner
        # d: the ladder and the finding's id, on demand; d again: back to the compact form.
        await pilot.press("d")
        await pilot.pause()
        banner = text(app, FindingBanner)
        assert "finding: vram_contention" in banner
        assert "observed:" in banner and "hypothesis:" in banner
        await pilot.press("d")
        await pilot.pause()
        assert "observed:" not in text(app, FindingBanner)
        await pilot.press("b")
        assert isinstance(app.screen, BudgetDialog)
        assert app.screen.value_text == "0.85"
        assert "The desktop is squeezing vLLM's memory" in text(app, "#budget-why")


async def test_an_open_banner_is_updated_only_when_its_text_changes() -> None:
    # A finding stays open for many ticks, and a banner update lays the whole screen out.
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await start_a_call_and_let_it_collapse(pilot)
        banner = app.query_one(FindingBanner)
        assert "squeezing vLLM's memory" in text(app, FindingBanner)
        updates: list[object] = []
        original = banner.update

        def counted(*args: Any, **kwargs: Any) -> None:
            updates.append(args)
            original(*args, **kwargs)

        banner.update = counted  # type: ignore[method-assign]
        await ticks(pilot, 3)
        assert updates == []  # the same finding, the same words: nothing to redo
        backend._findings[0] = replace(backend._findings[0], summary="Tokens/s fell to 5.")
        await ticks(pilot, 1)
        assert len(updates) == 1
        assert "Tokens/s fell to 5." in text(app, FindingBanner)


async def test_call_key_only_in_the_demo() -> None:
    backend = FakeBackend(demo=False)
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await toggle_call(pilot)
        await settle(pilot)
        assert app.check_action("toggle_call", ()) is False
        assert ("toggle_call", True) not in backend.calls
        titles = [title for title, _, _ in app.palette_entries()]
        assert "Start or end a simulated call" not in titles
        assert "Relaunch with another budget" in titles


async def test_keys_are_remapped_from_settings() -> None:
    backend = FakeBackend()
    backend.demo = False
    app = make_app(backend, Settings(interval_s=3600, keys={"relaunch": "x"}))
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("x")
        assert isinstance(app.screen, BudgetDialog)
        await pilot.press("escape")
        rows = {binding_id: key for key, _, binding_id in app.help_rows()}
        assert rows["relaunch"] == "x"


async def test_a_remapped_key_shows_in_the_banner_and_the_log_notice() -> None:
    """Keys moved in the settings are the keys the banner and the status name."""
    backend = FakeBackend()
    keys = {"restart": "k", "relaunch": "x", "timeline": "n", "start_stop": "g"}
    app = make_app(backend, Settings(interval_s=3600, keys=keys))
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 2)
        backend.crash()
        await ticks(pilot, 1)
        banner = text(app, FindingBanner)
        assert "k restart now" in banner and "x relaunch" in banner and "n events" in banner
        assert "r restart now" not in banner and "b relaunch" not in banner
        notice = app.query_one(ServerLog).border_subtitle
        assert "g starts it again" in notice and "s starts" not in notice


async def test_actions_are_disabled_while_one_runs() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        app.actions.busy = "relaunch"
        assert app.check_action("restart", ()) is None
        assert app.check_action("relaunch", ()) is None
        assert app.check_action("help", ()) is True


async def test_log_search_filters_and_focus_moves_to_the_log() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        assert not app.query(Input)  # made when a search begins: the first frame has none
        await pilot.press("slash")
        await pilot.press(*"KV cache")
        log = app.query_one("#server-log TailLog", TailLog)
        shown = log.kept.texts
        assert shown and all("kv cache" in line.lower() for line in shown)
        # What is typed is on screen: one row, no border eating it.
        search = app.query_one("#log-search", Input)
        assert search.region.height == 1
        rows = search.render_lines(Region(0, 0, search.size.width, search.size.height))
        assert "KV cache" in "".join(strip.text for strip in rows)
        await pilot.press("escape")
        await pilot.press("l")
        assert app.focused is log


async def test_the_log_follows_its_tail_unless_the_reader_scrolled_up() -> None:
    backend = FakeBackend()
    backend._log += distinct_lines(60, "line")  # more than the panel shows
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        log = app.query_one("#server-log TailLog", TailLog)
        await pilot.pause()
        assert log.max_scroll_y > 0 and log.scroll_y == log.max_scroll_y
        layouts: list[bool] = []
        lay_out = app.screen._refresh_layout
        app.screen._refresh_layout = lambda *a, **k: layouts.append(True) or lay_out(*a, **k)  # type: ignore[method-assign]

        backend._log.append("INFO new at the tail")
        await ticks(pilot, 1)
        await pilot.pause()
        assert log.scroll_y == log.max_scroll_y  # followed
        assert log.show_vertical_scrollbar
        # Following, the scrollbar takes no column: it would only say "at the end".
        assert log.scrollable_content_region.width == log.size.width
        # A line more is a repaint of the log, not a layout of the whole screen.
        assert not layouts

        log.scroll_to(y=3, animate=False)
        await pilot.pause()
        backend._log.append("INFO another while reading")
        await ticks(pilot, 1)
        await pilot.pause()
        assert log.scroll_y == 3  # the reader keeps their place
        assert log.kept.texts[-1].startswith("INFO another while reading")
        # Scrolled up, the scrollbar shows where the reader is.
        assert log.scrollable_content_region.width == log.size.width - 1

        # Back at the end (a key), the next line is followed and the scrollbar goes again.
        log.focus()
        await pilot.press("end")
        backend._log.append("INFO at the tail again")
        await ticks(pilot, 1)
        await pilot.pause()
        assert log.scroll_y == log.max_scroll_y
        assert log.scrollable_content_region.width == log.size.width
        # And the wheel still scrolls the log while it follows.
        at_end = log.scroll_y
        log.post_message(MouseScrollUp(log, 1, 1, 0, -1, 0, False, False, False))
        await pilot.pause()
        assert log.scroll_y < at_end


async def test_tiny_terminal_gets_the_compact_layout() -> None:
    app = make_app()
    async with app.run_test(size=(50, 14)) as pilot:
        await ticks(pilot, 2)
        assert app.screen.has_class("-compact")
        assert (
            app.query_one(ServerLog).display is False or not app.query_one(ServerLog).region.height
        )
        # The figures stay; the sparklines go.
        throughput = [line.plain for line in app.query_one(ThroughputPanel).lines]
        assert [line.split()[0] for line in throughput] == ["generation", "prompt", "requests"]
        assert len(app.query_one(KvPoolPanel).lines) == 4

        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        assert not app.screen.has_class("-compact")
        throughput = [line.plain for line in app.query_one(ThroughputPanel).lines]
        assert len(throughput) == 5 and set(throughput[1].strip()) <= set(SPARK_BLOCKS)
        assert throughput[1].strip()  # the history is drawn again, at the new width
        assert len(app.query_one(KvPoolPanel).lines) == 5


async def test_headroom_panel_hands_its_proposal_to_the_relaunch_dialog() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 34)) as pilot:
        await ticks(pilot, 2)
        await pilot.press("c")
        assert isinstance(app.screen, HeadroomScreen)
        await pilot.press("minus", "minus", "minus")
        table = text(app, "#headroom-table")
        assert "0.93" in table and "0.90" in table and "KV tokens" in table
        assert "desktop peak this session" in text(app, "#headroom-peak")
        dialog = await open_budget_dialog(pilot)
        assert dialog.value_text == "0.90"
        await pilot.press("enter")
        await settle(pilot)
        assert backend.calls == [("relaunch", 0.90)]


async def test_timeline_lists_events_with_finding_durations() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        backend.crash()
        await ticks(pilot, 1)
        await pilot.press("r")
        await settle(pilot)
        await pilot.press("e")
        assert isinstance(app.screen, TimelineScreen)
        from textual.widgets import DataTable

        table = app.screen.query_one(DataTable)
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        kinds = [row[1] for row in rows]
        assert "restart" in kinds and "exit" in kinds and "finding" in kinds
        assert any("server_crashed" in row[2] and "lasted" in row[2] for row in rows)


async def test_t_cycles_through_the_bundled_themes() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.theme == "vramtop-dark"
        seen = set()
        for _ in range(3):
            await pilot.press("t")
            seen.add(app.theme)
        assert {"vramtop-dark", "vramtop-light", "vramtop-high-contrast"} <= seen


async def test_panels_redraw_in_the_new_theme_s_colours() -> None:
    # Panels keep each row's drawing until the row changes: a new theme must not be one.
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 3)
        panel = app.query_one(ThroughputPanel)

        def spark_colours() -> set[object]:
            strips = panel.render_lines(Region(0, 0, *panel.outer_size))
            return {
                segment.style.color if segment.style else None
                for strip in strips
                for segment in strip
                if segment.text.strip() and set(segment.text.strip()) <= set(SPARK_BLOCKS)
            }

        before = spark_colours()
        await pilot.press("t")
        await pilot.pause()
        after = spark_colours()
        assert before and after and before.isdisjoint(after)


async def test_demo_header_fits_80_columns_with_the_call_marker_and_a_quick_start() -> None:
    backend = FakeBackend(profile_name="demo", wsl=False)
    backend.ready_s = 0.6
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 1)
        await toggle_call(pilot)
        await settle(pilot)
        await ticks(pilot, 1)
        first, second = text(app, ConsoleHeader).splitlines()[:2]
        assert "call on" in first
        assert len(first.rstrip()) <= 78  # the header's width inside its padding
        assert "· demo" not in first  # "demo" once, not also as the profile's name
        assert "simulated call started" in second  # the news is whole: details give way
        await ticks(pilot, 20)  # the fake clock moves one second a tick: the news is old
        second = text(app, ConsoleHeader).splitlines()[1]
        assert "ready in 0.6s" in second


async def test_a_result_leaves_the_status_line_once_it_is_old_news() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        await toggle_call(pilot)
        await settle(pilot)
        assert "simulated call started" in text(app, ConsoleHeader)
        await ticks(pilot, 20)  # the fake clock moves one second a tick
        assert "simulated call started" not in text(app, ConsoleHeader)
        assert "call on" in text(app, ConsoleHeader)  # the state itself stays


async def test_tick_results_reach_the_app_through_the_message() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 2)
        assert app.shown.headroom_inputs is not None
        assert app.shown.normal is not None


class _Settled:
    """The console's settling (`_set_aside_start_up`, a timer SETTLE_S after the mount)
    watched: the freeze count it found, and an event once it has run. A busy machine can
    take longer than SETTLE_S to hand a test its pilot, so the test waits for the settling
    itself rather than for a time."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.found: list[int] = []
        self.done = threading.Event()
        original = app_module._set_aside_start_up

        def watched() -> None:
            self.found.append(gc.get_freeze_count())
            original()
            self.done.set()

        monkeypatch.setattr(app_module, "_set_aside_start_up", watched)

    async def wait(self, pilot: Any) -> None:
        await wait_until_async(
            self.done.is_set, deadline_s=PROCESS_S, what="the console settled", pause=pilot.pause
        )


async def test_what_start_up_built_is_set_aside_from_the_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Full collections walk every tracked object: once the console has settled, what start-up
    # built is frozen so they stop walking it (see _set_aside_start_up). The collector, held
    # off through start-up (vramtop/entry.py), runs again from then on.
    settled = _Settled(monkeypatch)
    gc.unfreeze()
    gc.disable()
    try:
        app = make_app()
        async with app.run_test(size=(100, 30)) as pilot:
            await settled.wait(pilot)
            frozen = gc.get_freeze_count()
            assert gc.isenabled()
        assert settled.found == [0]  # nothing was frozen before
        assert frozen > 10_000  # Textual's and the console's objects, not a handful
    finally:
        gc.enable()
        gc.unfreeze()


async def test_a_console_opened_where_the_collector_runs_leaves_it_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A test's process, or a program opening the console: its objects are not frozen.
    settled = _Settled(monkeypatch)
    gc.unfreeze()
    assert gc.isenabled()
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settled.wait(pilot)
        assert gc.get_freeze_count() == 0
        assert gc.isenabled()


class _HangingBackend(FakeBackend):
    """A source that hangs while `hang` is clear: the read blocks, the reads are counted."""

    def __init__(self) -> None:
        super().__init__()
        self.hang = threading.Event()
        self.hang.set()
        self.reads = 0
        self.thread: threading.Thread | None = None

    def next_sample(self) -> Sample:
        self.reads += 1
        self.thread = threading.current_thread()
        self.hang.wait(PROCESS_S)
        return super().next_sample()


async def test_a_hanging_source_neither_piles_up_reads_nor_freezes_keys() -> None:
    backend = _HangingBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        before = backend.reads
        backend.hang.clear()
        app.request_tick()  # this read hangs …
        await wait_until_async(
            lambda: backend.reads > before, deadline_s=PROCESS_S, what="the read begun"
        )
        for _ in range(5):  # … and the timer keeps asking
            app.request_tick()
        await pilot.press("question_mark")  # keys still work meanwhile
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert app.reads_pending
        backend.hang.set()
        await settle(pilot)
        # The hanging read, then one read for all the asks made while it hung: not five.
        assert backend.reads - before == 2
        assert not app.reads_pending


async def test_the_reader_ends_with_the_console(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its next look an hour away: a reader that returns now was woken by the unmount.
    monkeypatch.setattr(reader_module, "READER_CHECK_S", 3600.0)
    backend = _HangingBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        thread = backend.thread
        assert _runs_the_reader(thread)
    # Woken on unmount, it returns at once, not at its next look (READER_CHECK_S): a
    # console that quits is not kept waiting for its thread.
    await wait_until_async(
        lambda: not _runs_the_reader(thread),
        deadline_s=PROCESS_S,
        what="the reader returned before its next look",
        poll_s=0.01,
    )


def _runs_the_reader(thread: threading.Thread | None) -> bool:
    assert thread is not None and thread.ident is not None
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == "_reader":
            return True
        frame = frame.f_back
    return False


class _DeadWorldBackend(FakeBackend):
    """The demo whose simulated machine has gone away: a call cannot be started."""

    def toggle_call(self) -> bool:
        raise ConnectionRefusedError("the simulated machine is not answering")


async def test_a_call_that_cannot_be_toggled_is_said_on_screen() -> None:
    app = make_app(_DeadWorldBackend())
    async with app.run_test(size=(120, 30)) as pilot:
        await ticks(pilot, 1)
        await toggle_call(pilot)
        await settle(pilot)
        header = text(app, ConsoleHeader)
        assert "simulated call not changed" in header
        assert "call on" not in header
        assert any("not answering" in str(n.message) for n in app._notifications)
        await ticks(pilot, 1)  # and the console keeps updating
        assert app.sample is not None


async def test_the_console_hides_none_of_textuals_own_methods() -> None:
    # An attribute of the app named like one of App's methods replaces it: `self._log` once
    # held the server log panel, and Textual's devtools logging (`App._log`) would then have
    # called the panel.
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        hidden = [n for n in vars(app) if inspect.isfunction(inspect.getattr_static(App, n, None))]
        assert hidden == []


async def test_text_selected_in_a_panel_is_the_text_of_the_rows_dragged_over() -> None:
    # Each row of a panel is drawn on its own; its cells must still say which row they are,
    # or a drag over a lower row copies (and highlights) the first.
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 2)
        kv = app.query_one(KvPoolPanel)
        rows = [line.plain for line in kv.lines]
        x0, y0 = kv.content_region.x - kv.region.x, kv.content_region.y - kv.region.y
        for row in (3, 4):
            await pilot.mouse_down(kv, offset=(x0, y0 + row))
            await pilot.hover(kv, offset=(x0 + 10, y0 + row))
            await pilot.mouse_up(kv, offset=(x0 + 10, y0 + row))
            await pilot.pause()
            assert app.screen.get_selected_text() == rows[row][:11]  # (the end cell too)
            # Drawn highlighted on that row: its cells carry the selection's background.
            selected = app.screen.get_component_rich_style("screen--selection").bgcolor
            drawn = kv.render_lines(Region(0, 0, *kv.region.size))  # border and all
            highlighted = [
                y
                for y, strip in enumerate(drawn)
                if any(s.style and s.style.bgcolor == selected for s in strip)
            ]
            assert highlighted == [y0 + row]


async def test_the_restart_prompt_is_whole_at_80_columns() -> None:
    # Requests run: `r` asks for a second `r`. The state's details give way to the prompt.
    backend = FakeBackend()
    backend.ready_s = 72.0
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 3)
        assert "ready in" in text(app, ConsoleHeader).splitlines()[1]
        await pilot.press("r")
        await pilot.pause()
        second = text(app, ConsoleHeader).splitlines()[1]
        assert "request(s) running: press r again to restart" in second
        assert "…" not in second and "ready in" not in second
        # (The budget gives way too: beside it the line was 80 columns, cut on screen. The
        # VRAM panel's budget line says it.)
        assert "● running pid" in second and len(second) <= 78
