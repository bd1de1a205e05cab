"""The fixed-scale sparkline and the VRAM bar, as text: what a person reads off the panels."""

from __future__ import annotations

from dataclasses import replace

import pytest

from vramtop.core.model import GIB, Split, SplitMethod
from vramtop.tui.widgets.text_panel import SPARK_BLOCKS, spark_text
from vramtop.tui.widgets.vram_bar import VramBar, bar_cells


def test_zero_is_the_bottom_and_the_ceiling_the_top() -> None:
    assert spark_text([0.0, 40.0, 80.0], ceiling=80.0, width=3) == " " + SPARK_BLOCKS[4] + "█"
    # 76 against 78 tok/s is not a collapse: both sit near the top, not at opposite ends.
    assert spark_text([76.0, 78.0], ceiling=90.0, width=2) == "▇▇"


def test_a_trickle_stays_visible_and_a_spike_is_clipped() -> None:
    assert spark_text([0.01, 500.0], ceiling=100.0, width=2) == "▁█"


def test_the_newest_values_are_at_the_right_edge() -> None:
    history = [10.0] * 50 + [0.0] * 3
    assert spark_text(history, ceiling=10.0, width=5) == "██   "
    assert spark_text([10.0], ceiling=10.0, width=4) == "   █"  # short history: right-aligned
    assert spark_text([10.0], ceiling=0.0, width=1) == "█"  # a zero ceiling is not a crash
    assert spark_text([10.0], ceiling=10.0, width=0) == ""


def _split(server_gib: float, desktop_gib: float, budget_gib: float | None) -> Split:
    total = 32 * GIB
    server, desktop = int(server_gib * GIB), int(desktop_gib * GIB)
    return Split(
        method=SplitMethod.PER_PROCESS,
        total_bytes=total,
        server_bytes=server,
        desktop_bytes=desktop,
        free_bytes=total - server - desktop,
        budget_bytes=int(budget_gib * GIB) if budget_gib is not None else None,
        headroom_bytes=None,
        detail="",
    )


def test_the_bar_splits_the_card_and_marks_the_budget() -> None:
    split = _split(server_gib=16, desktop_gib=8, budget_gib=24)
    assert bar_cells(split, 32) == (16, 8, 23)
    drawn = VramBar(split).draw(32).plain
    assert drawn == "█" * 16 + "▓" * 7 + "▌" + "░" * 8
    assert VramBar(None).draw(4).plain == "····"  # no reading: no made-up split


def test_a_spike_that_scrolled_off_no_longer_sets_the_scale() -> None:
    """After a relaunch a 2000 tok/s blip scrolled out of sight: 320–411 tok/s read as bars."""
    from vramtop.tui.widgets.throughput_panel import _plot

    history = (2000.0, *([411.0, 320.0, 380.0] * 10))
    drawn = _plot(history, normal=None).draw(20).plain
    assert "▁" not in drawn and drawn.count("█") >= 6
    # While the spike is still on screen it sets the top, and the rest sits low beside it.
    assert "▁" in _plot(history, normal=None).draw(len(history)).plain


def test_the_banner_says_when_it_had_no_normal_rate_to_compare_with() -> None:
    from tests.support.console import open_finding
    from vramtop.core.diagnosis.memory_evidence import NO_NORMAL_RATE
    from vramtop.tui.widgets.finding_banner import banner_text

    finding = open_finding(confidence=NO_NORMAL_RATE)
    text = banner_text(finding).plain
    assert "no normal rate" in text and "restart" in text
    assert "no normal rate" not in banner_text(replace(finding, confidence=None)).plain


def test_the_throughput_panel_says_where_the_normal_rate_came_from() -> None:
    from vramtop.core.diagnosis.normal_rate import INTER_TOKEN_LATENCY, REMEMBERED, NormalRate
    from vramtop.core.diagnosis.throughput import normal_origin

    remembered = NormalRate({INTER_TOKEN_LATENCY: {1: 77.0}}, REMEMBERED, saved_at=0.0)
    assert normal_origin(remembered, 7200.0) == "remembered 2 h ago"
    assert normal_origin(NormalRate({INTER_TOKEN_LATENCY: {1: 77.0}}), 5.0) == "learned now"
    assert normal_origin(None, 5.0) == "can't judge yet"


async def test_a_wrapped_message_is_laid_out_again_only_when_it_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Why there is no GPU reading stays up for as long as it is true: wrapping it again every
    second was most of what the VRAM panel cost to draw."""
    from textual.app import App, ComposeResult
    from textual.content import Content

    from vramtop.tui.widgets.text_panel import TextPanel, Wrapped

    wraps: list[str] = []
    real_wrap = Content.wrap

    def counting(self: Content, width: int, **options: object) -> list[Content]:
        wraps.append(self.plain)
        return real_wrap(self, width, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(Content, "wrap", counting)
    message = "GPU readings unavailable: " + "the driver is not loaded " * 4

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield TextPanel()

    app = One()
    async with app.run_test(size=(40, 10)):
        panel = app.query_one(TextPanel)
        for _ in range(3):
            panel.set_rows(["a row", Wrapped(Content(message))])
        assert len(wraps) == 1
        lines = [line.plain for line in panel.lines]
        assert len(lines) > 2 and "".join(lines[1:]).replace(" ", "") == message.replace(" ", "")
        # The same words in another style are another row: laid out (and shown) anew.
        panel.set_rows(["a row", Wrapped(Content.styled(message, "bold"))])
        assert len(wraps) == 2
        panel.set_rows(["a row", Wrapped(Content(message + " now"))])
        assert len(wraps) == 3 and panel.lines[-1].plain.endswith("now")


async def test_a_panel_shown_the_same_again_repaints_nothing() -> None:
    """Each second the panels are shown again; one that did not change asks for no repaint.
    (The VRAM panel set its title each time, and a title set repaints the whole panel: the
    compositor then redrew every line from it to the rows that did change.)"""
    from textual.app import App, ComposeResult

    from vramtop.core.model import GpuReading
    from vramtop.tui.widgets.vram_split_panel import VramSplitPanel

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield VramSplitPanel()

    app = One()
    async with app.run_test(size=(60, 12)) as pilot:
        panel = app.query_one(VramSplitPanel)
        reading = GpuReading(source="nvml", error="NVML is not available")
        panel.show(reading, None, None)
        await pilot.pause()
        repaints: list[tuple[object, ...]] = []
        real_refresh = panel.refresh

        def counting(*regions: object, **options: object) -> object:
            repaints.append(regions)
            return real_refresh(*regions, **options)  # type: ignore[arg-type]

        panel.refresh = counting  # type: ignore[method-assign]
        panel.show(reading, None, None)
        assert repaints == []
        assert panel.border_title == "VRAM split"


async def test_the_vram_panel_lays_out_its_rows_again_only_when_what_it_shows_changed() -> None:
    from textual.app import App, ComposeResult

    from vramtop.core.model import GpuDevice, GpuReading, ServerInfo, ServerState
    from vramtop.tui.widgets.vram_split_panel import VramSplitPanel

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield VramSplitPanel()

    split = replace(_split(server_gib=16, desktop_gib=8, budget_gib=24), headroom_bytes=GIB)
    card = GpuDevice(0, "RTX 5090", 32 * GIB, 24 * GIB, 8 * GIB)
    gpu = GpuReading(devices=(card,), source="nvml")
    app = One()
    async with app.run_test(size=(90, 12)) as pilot:
        panel = app.query_one(VramSplitPanel)
        laid_out: list[int] = []
        real_set_rows = panel.set_rows

        def counting(rows: object) -> None:
            laid_out.append(1)
            real_set_rows(rows)  # type: ignore[arg-type]

        panel.set_rows = counting  # type: ignore[method-assign]
        running = ServerInfo(state=ServerState.RUNNING, pid=7)
        panel.show(gpu, split, running)
        await pilot.pause()
        panel.show(gpu, split, ServerInfo(state=ServerState.RUNNING, pid=7))
        assert len(laid_out) == 1
        assert "leaves the desktop" in "\n".join(line.plain for line in panel.lines)
        # The server went down: the same memory, another line.
        panel.show(gpu, split, ServerInfo(state=ServerState.CRASHED, pid=7))
        assert len(laid_out) == 2
        assert "server down" in "\n".join(line.plain for line in panel.lines)
