"""What a newcomer meets: every way out asks the same question (only where there is one),
the banner in words, one list of themes, whole events, a status line that says things once."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from textual import events
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Label
from textual.widgets._toast import Toast

from tests.support.console import (
    make_app,
    open_finding,
    settle,
    start_a_call_and_let_it_collapse,
    text,
    ticks,
)
from tests.support.fake_backend import FakeBackend
from vramtop.core.diagnosis.collapse import Point
from vramtop.core.diagnosis.meter import interval_rates
from vramtop.core.diagnosis.normal_rate import INTER_TOKEN_LATENCY, NormalRate
from vramtop.core.diagnosis.throughput import ThroughputWindow, shown_rate
from vramtop.core.findings import Remedy
from vramtop.core.model import Rates, ServerState
from vramtop.machines.deferred_backend import BackendUnavailable
from vramtop.machines.interface import LOG_TAIL, Frame
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.tui.app import VramtopApp
from vramtop.tui.commands import ConsoleThemes
from vramtop.tui.screens.budget_dialog import BudgetDialog
from vramtop.tui.screens.headroom_screen import HeadroomScreen
from vramtop.tui.screens.quit_dialog import QuitDialog
from vramtop.tui.screens.timeline_screen import EventScreen, TimelineScreen
from vramtop.tui.widgets.console_header import ConsoleHeader
from vramtop.tui.widgets.finding_banner import banner_text
from vramtop.tui.widgets.throughput_panel import ThroughputPanel
from vramtop.tui.widgets.vram_split_panel import VramSplitPanel


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
    # (The fake demo is the 5090 the WSL2 way: see test_quit_farewell.py for every card.)
    assert app.farewell is not None and app.farewell.endswith("vramtop stop --demo --wsl")


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
    backend.acts = False
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


async def test_a_stopped_server_is_not_shown_with_its_last_runs_pid_or_ready_time() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(120, 30)) as pilot:
        await ticks(pilot, 1)
        assert "ready in" in text(app, ConsoleHeader)
        await pilot.press("s", "s")  # a request runs: the second press confirms
        await settle(pilot)
        await ticks(pilot, 1)
        header = text(app, ConsoleHeader)
        assert "stopped" in header
        assert "pid" not in header and "ready in" not in header


class _RelaunchFails(FakeBackend):
    def relaunch(self, *args: Any, **kwargs: Any) -> ActionResult:
        return ActionResult(
            False, "start failed: out of memory at startup: budget 0.99 needs 31.52 GiB"
        )


async def test_a_failures_toast_never_covers_the_dialog_opened_after_it() -> None:
    # The banner offers b after a failed start: the dialog it opens, at 80x24 nearly the
    # screen's height, must not sit under the failure's toast.
    app = make_app(_RelaunchFails())
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ticks(pilot, 1)
        await pilot.press("b", "enter")
        await settle(pilot)
        await pilot.pause()
        assert list(app.screen.query(Toast))  # the failure is told in a toast
        await pilot.press("b")
        await pilot.pause()
        assert isinstance(app.screen, BudgetDialog)
        dialog = app.screen.query_one("#budget-dialog").region
        shown = [t.region for t in app.screen.query(Toast) if t.region]
        assert not [region for region in shown if region.overlaps(dialog)]


async def test_every_line_of_the_what_if_shows_at_80x24() -> None:
    # With a finding open the what-if has its most lines; its last (how to edit a field,
    # how to close) was cut off below the dialog's edge at 24 rows.
    app = make_app(FakeBackend())
    async with app.run_test(size=(80, 24)) as pilot:
        await start_a_call_and_let_it_collapse(pilot)
        await pilot.press("c")
        await pilot.pause()
        dialog = app.screen.query_one("#headroom")
        inside = dialog.content_region
        assert [child.region.bottom <= inside.bottom for child in dialog.children] == [True] * len(
            dialog.children
        )
        assert "esc closes" in text(app, "#headroom")


class _SlowLoad(FakeBackend):
    """A start that waits for its server until a stop ends it, as the supervisor's does."""

    def __init__(self) -> None:
        super().__init__()
        self.state = ServerState.STOPPED
        self.stopped = threading.Event()

    def start(self, progress: ProgressCallback | None = None) -> ActionResult:
        self.calls.append(("start",))
        self.state = ServerState.STARTING
        if progress is not None:
            progress("loading weights")
        if self.stopped.wait(timeout=30):
            return ActionResult(False, "stopped while loading: another vramtop stopped it")
        return ActionResult(True, "started")

    def stop(self, progress: ProgressCallback | None = None) -> ActionResult:
        result = super().stop(progress)
        self.stopped.set()
        return result


@asynccontextmanager
async def _loading() -> AsyncIterator[tuple[_SlowLoad, VramtopApp, Pilot[int]]]:
    """The console at 80x24, its server started with s and still loading."""
    backend = _SlowLoad()
    app = make_app(backend)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ticks(pilot, 1)
        await pilot.press("s")
        await pilot.pause()
        yield backend, app, pilot


async def test_s_stops_a_server_still_loading() -> None:
    # A big model loads for minutes: s stops it then, as it does once it runs.
    async with _loading() as (backend, app, pilot):
        assert app.busy == "start"
        assert app.check_action("start_stop", ()) is True
        await pilot.press("s")
        await settle(pilot)
        assert backend.calls == [("start",), ("stop",)]
        assert app.busy is None
        assert "start stopped while loading" in text(app, ConsoleHeader)
        assert not list(app.screen.query(Toast))  # asked for: not told as a failure


async def test_a_resize_under_a_dialog_lays_the_console_out_for_the_new_size() -> None:
    app = make_app(FakeBackend())
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("question_mark")
        await pilot.pause()
        await pilot.resize_terminal(60, 20)
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]
        assert app.screen.has_class("-compact")  # the small terminal's layout
        assert not app.query_one("#server-log").display


class _SlowClose(FakeBackend):
    """A stop on quit that takes a while; its reads fail meanwhile, as the deferred
    backend's do once it is closing."""

    def __init__(self) -> None:
        super().__init__()
        self.closing = threading.Event()
        self.may_close = threading.Event()

    def tick(self, log_limit: int = LOG_TAIL) -> Frame:
        if self.closing.is_set():
            raise BackendUnavailable("the console is closing")
        return super().tick(log_limit)

    def close(self, stop_server: bool) -> None:
        self.closing.set()
        self.may_close.wait(timeout=30)
        super().close(stop_server)


async def test_quitting_says_what_it_does_until_it_is_done() -> None:
    backend = _SlowClose()
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("q", "s")
        await pilot.pause()
        assert backend.closing.wait(timeout=30)
        await ticks(pilot, 1)  # a read asked and answered (failed: the backend is closing)
        header = text(app, ConsoleHeader)
        backend.may_close.set()
        assert "stopping vLLM, then quitting" in header
        assert "reading failed" not in header


def test_the_rate_shown_rides_over_pauses_between_requests() -> None:
    # An agent's requests with pauses between them: 82 while generating, nothing between,
    # and a second in which a request ended halfway.
    recent = list(enumerate((82.0, 0.0, 29.0, 82.0, 0.0)))
    assert shown_rate(0.0, recent) == (82 + 29 + 82) / 3
    assert shown_rate(None, recent) is None  # not known now: "—"
    assert shown_rate(0.0, [(t, 0.0) for t in range(5)]) == 0.0  # idle: it says so


def _show(
    app: VramtopApp, frames: Iterable[tuple[float, float]], normal_share: float | None = None
) -> str:
    """Show (time, generation rate) frames on the throughput panel; `normal_share`: the rate's
    share of its normal (None: no normal rate). The panel's first line."""
    panel = app.query_one(ThroughputPanel)
    sample = app.sample
    assert sample is not None
    window = _WINDOWS.setdefault(id(app), ThroughputWindow())  # the core's, as a session's
    for t, rate in frames:
        frame = replace(sample, t=t, rates=replace(sample.rates, generation_tps=rate))
        normal = None if normal_share is None else rate / normal_share
        view = window.add(frame, None, None, None, normal)
        panel.show(Frame(frame, normal=Rates(generation_tps=normal), throughput=view))
    return panel.lines[0].plain


_WINDOWS: dict[int, ThroughputWindow] = {}


async def test_the_rate_shown_averages_seconds_of_the_samples_own_time() -> None:
    # Three frames 50 s apart (a replay at ×50): the figure is the latest, not their mean.
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        frames = ((100.0, 79.0), (150.0, 8.0), (200.0, 8.0), (200.0, 8.0))
        # (The label is "gen" where the line would not hold where its normal came from.)
        assert "    8 tok/s" in _show(app, frames)
        # A pause between requests: the figure rides over it, on the last seconds' mean.
        line = _show(app, ((201.0, 0.0), (202.0, 80.0), (203.0, 0.0)))
        assert "   44 tok/s" in line  # (8 + 80) / 2


async def test_the_normal_shown_beside_the_rate_is_smoothed_over_the_same_seconds() -> None:
    # An agent moving between one and two requests, each at its normal 80 tok/s: the total
    # and its normal both alternate 80 / 160. Figure and normal compare the same seconds.
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        frames = ((300.0, 80.0), (301.0, 160.0), (302.0, 80.0), (303.0, 160.0))
        assert "  120 tok/s  normal 120" in _show(app, frames, normal_share=1.0)
        # A collapse at the same concurrencies: a tenth of normal, beside the same normal.
        frames = ((310.0, 8.0), (311.0, 16.0), (312.0, 8.0), (313.0, 16.0))
        assert "   12 tok/s  normal 120" in _show(app, frames, normal_share=0.1)


async def test_under_agent_traffic_the_normal_is_beside_the_per_request_speed() -> None:
    # Three requests running, two of them still reading their prompts: 40 tok/s in all while
    # the one decoding runs at its normal 80 (vLLM's latency histogram: 80 tokens per second
    # of decoding). The normal per-request speed stands beside the per-request figure, not
    # beside the total, so nothing reads as slow; a collapse of the decode speed does. The
    # figures are the throughput view's, as the diagnosis judged each interval.
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        panel = app.query_one(ThroughputPanel)
        sample = app.sample
        assert sample is not None and sample.server is not None
        metrics = sample.server.metrics
        assert metrics is not None
        normal = NormalRate({INTER_TOKEN_LATENCY: {2: 80.0}})
        window = ThroughputWindow()
        shown: list[Any] = []

        def show(t: float, tokens: float, seconds: float) -> str:
            m = replace(
                metrics,
                requests_running=3.0,
                inter_token_latency_count=tokens,
                inter_token_latency_sum_s=seconds,
            )
            server = replace(sample.server, metrics=m)
            rates = replace(sample.rates, generation_tps=40.0)
            frame = replace(sample, t=t, server=server, rates=rates, info=None)
            judged = interval_rates(shown[-1], frame, None) if shown else None
            point = None
            if judged is not None:
                point = Point(
                    t, 40.0, judged.per_request_tps, None, 3.0, False, True, judged.measure
                )
            reference = normal.for_running(3.0, INTER_TOKEN_LATENCY) if point else None
            view = window.add(frame, point, normal, reference, 240.0)
            shown.append(frame)
            panel.show(Frame(frame, normal=Rates(generation_tps=240.0), throughput=view))
            return str(panel.lines[0].plain)

        show(400.0, 1000.0, 10.0)
        line = show(402.0, 1160.0, 12.0)  # 160 tokens in 2 s of decoding
        assert "40 tok/s  80/req · normal 80 · learned now" in line
        assert "normal 240" not in line
        assert not _error_coloured(panel)
        line = show(404.0, 1180.0, 14.0)  # then 20 tokens in 2 s: the judged interval's 10
        assert "10/req · normal 80" in line
        assert _error_coloured(panel)


def _error_coloured(panel: ThroughputPanel) -> bool:
    return any("error" in str(span.style) for span in panel.lines[0].spans)


async def test_the_generation_line_drops_detail_before_the_normal_at_80_columns() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 3)
        line = app.query_one(ThroughputPanel).lines[0].plain
        width = app.query_one(ThroughputPanel).content_region.width
        assert "normal" in line and len(line) <= width


def test_a_finding_without_a_normal_rate_says_so_in_the_compact_banner() -> None:
    finding = open_finding(
        summary="Generation fell to 9 tok/s with the card full.",
        confidence="low",
        remedy=Remedy(budget=0.84),
    )
    first = banner_text(finding).plain.splitlines()[0]
    assert first == "⚠ The desktop is squeezing vLLM's memory  (low confidence)"
    sure = banner_text(replace(finding, confidence="high")).plain.splitlines()[0]
    assert "confidence" not in sure


NVML_MISSING = (
    "NVML is not available (NVML Shared Library Not Found). Is the NVIDIA driver installed? "
    "Try vramtop --demo to see the console without a GPU."
)


async def test_why_the_gpu_cannot_be_read_is_wrapped_not_cut() -> None:
    backend = FakeBackend()
    backend.nvml_error = NVML_MISSING
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 2)
        panel = app.query_one(VramSplitPanel)
        lines = [line.plain for line in panel.lines]
        assert all(len(line) <= panel.content_region.width for line in lines)
        shown = " ".join(" ".join(lines).split())
        assert f"GPU readings unavailable: {NVML_MISSING}" in shown
        assert "nvidia-smi" in shown


async def test_c_without_live_terms_says_why_for_the_state_it_is_in() -> None:
    backend = FakeBackend()
    backend.nvml_error = NVML_MISSING  # running, but the card's size is not known
    app = make_app(backend)
    app_inputs = backend.headroom_inputs
    backend.headroom_inputs = lambda: None  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 2)
        await pilot.press("c")
        await pilot.pause()
        label = app.screen.query_one("#headroom-none", Label)
        said = str(label.render())
        assert "Start the server" not in said  # it is running
        assert "the GPU cannot be read" in said and "vramtop calc --total-gib" in said
        dialog = app.screen.query_one("#headroom")
        assert label.size.width <= dialog.content_region.width and label.size.height >= 2
        await pilot.press("escape")
        backend.state = ServerState.STOPPED
        backend.headroom_inputs = app_inputs  # type: ignore[method-assign]
        await ticks(pilot, 1)
        await pilot.press("c")
        await pilot.pause()
        assert "Start the server (s)" in str(app.screen.query_one("#headroom-none").render())


def keys(*pressed: str) -> list[events.Key]:
    names = {".": "full_stop"}
    return [events.Key(k, None) if len(k) > 1 else events.Key(names.get(k, k), k) for k in pressed]


async def test_the_budget_field_keeps_what_was_typed_fast() -> None:
    # Backspaces and "0.93" arriving together (fast typing): the field's deleting keys used to
    # run after the characters typed behind them, leaving it empty and "refused".
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("b")
        await pilot.pause()
        field = app.screen.query_one("#budget-value", Input)
        for key in keys("backspace", "backspace", "backspace", "backspace", "0", ".", "9", "1"):
            app.post_message(key)
        await settle(pilot)
        assert field.value == "0.91"
        assert "refused" not in text(app, "#budget-reason")
        # A refused value stays as typed, with the reason beside it.
        for key in keys("ctrl+u", "1", ".", "5"):
            app.post_message(key)
        await settle(pilot)
        assert field.value == "1.5" and "refused" in text(app, "#budget-reason")


async def test_a_failure_told_while_a_dialog_is_open_is_shown_once_it_closes() -> None:
    # Toasts wait under a dialog (app.tcss); a failure's must not run out of time there.
    async with _loading() as (backend, app, pilot):
        await pilot.press("c")  # the what-if, read while the server loads
        await pilot.pause()
        assert isinstance(app.screen, HeadroomScreen)
        backend.stopped.set()  # stopped by another vramtop: the start fails
        await settle(pilot)
        for notification in app._notifications:
            notification.raised_at -= 60  # a minute with the dialog open
        await pilot.press("escape")
        await pilot.pause()
        await pilot.pause()
        toasts = [str(toast.render()) for toast in app.screen.query(Toast)]
        assert [t for t in toasts if "another vramtop stopped it" in t]


class _SlowStop(FakeBackend):
    """A stop that waits, before its first step, until the test lets it go on."""

    def __init__(self) -> None:
        super().__init__()
        self.go_on = threading.Event()

    def stop(self, progress: ProgressCallback | None = None) -> ActionResult:
        self.go_on.wait(timeout=30)
        return super().stop(progress)


async def test_a_stop_reads_as_a_stop_from_its_first_moment() -> None:
    backend = _SlowStop()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("s", "s")  # a request runs: the second press confirms
        await pilot.pause()
        said = text(app, ConsoleHeader)
        backend.go_on.set()
        await settle(pilot)
        assert "stop: stopping…" in said and "starting" not in said
