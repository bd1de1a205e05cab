"""A panel's words are never cut with "…": the VRAM panel's note and its `windows:` and
`top:` rows, and the throughput panel's note of where the normal rate came from, wrap (a
line breaks between two facts, never inside one) at 80 and at 120 columns."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from tests.support.console import make_app, ticks
from tests.support.fake_backend import FakeBackend
from vramtop.core.model import (
    GIB,
    GpuDevice,
    GpuReading,
    ProcessMemory,
    ServerInfo,
    ServerState,
)
from vramtop.core.split import split_card, split_from_windows
from vramtop.core.windows.reading import WindowsGpuReading, WindowsProcessGpu
from vramtop.tui.widgets.text_panel import Facts, TextPanel
from vramtop.tui.widgets.throughput_panel import _GenerationRow
from vramtop.tui.widgets.vram_split_panel import VramSplitPanel

RUNNING = ServerInfo(state=ServerState.RUNNING, pid=30204)
TOTAL = int(31.8 * GIB)
# The panel's inner width in the console at 80 and 120 columns (a border and a padding).
WIDTHS = (76, 116)


def _wsl() -> tuple[GpuDevice, WindowsGpuReading]:
    device = GpuDevice(0, "NVIDIA GeForce RTX 5090", TOTAL, int(31.8 * GIB), 0)
    process = WindowsProcessGpu
    windows = WindowsGpuReading(
        wsl_vm=process(1, "vmmemWSL", int(27.53 * GIB), int(2.6 * GIB)),
        desktop=(
            process(2, "ms-teams.exe", int(2.7 * GIB), 0),
            process(3, "dwm.exe", int(1.0 * GIB), 0),
            process(4, "msedge.exe", int(0.6 * GIB), 0),
        ),
    )
    return device, windows


def _native() -> GpuDevice:
    return GpuDevice(
        0,
        "NVIDIA GB10",
        TOTAL,
        int(30.0 * GIB),
        int(1.8 * GIB),
        processes=(
            ProcessMemory(32591, "VLLM::EngineCore", int(26.0 * GIB)),
            ProcessMemory(4194402, "zoom", int(2.6 * GIB)),
            ProcessMemory(4194400, "gnome-shell", int(1.0 * GIB)),
        ),
    )


async def _lines(panel: TextPanel, width: int, show: object) -> list[str]:
    class One(App[None]):
        CSS = f"TextPanel {{ width: {width}; }}"

        def compose(self) -> ComposeResult:
            yield panel

    app = One()
    async with app.run_test(size=(width + 4, 20)) as pilot:
        show()  # type: ignore[operator]
        await pilot.pause()
        assert panel.content_region.width == width
        lines = [line for line in panel.lines]
        assert all(line.cell_length <= width for line in lines), [ln.plain for ln in lines]
        return [line.plain for line in lines]


def _joined(lines: list[str]) -> str:
    return " ".join(" ".join(line.split()) for line in lines)


@pytest.mark.parametrize("width", WIDTHS)
async def test_the_wsl_note_and_windows_row_are_whole(width: int) -> None:
    # Seen in the --wsl demo at 120 columns: "… the rest in use is the de…" and at 80 the
    # windows row ended "dwm…".
    device, windows = _wsl()
    split = split_from_windows(device, windows, util=0.93)
    assert split is not None
    panel = VramSplitPanel()
    gpu = GpuReading(devices=(device,), source="nvml")
    lines = await _lines(panel, width, lambda: panel.show(gpu, split, RUNNING, windows))
    text = _joined(lines)
    assert " ".join(split.detail.split()) in text
    for fact in ("WSL VM 27.5 in VRAM, 2.6 in system memory", "ms-teams.exe 2.7", "dwm.exe 1.0"):
        assert any(fact in line for line in lines), (fact, lines)  # one line holds each fact
    assert any("msedge.exe 0.6" in line for line in lines)


@pytest.mark.parametrize("width", WIDTHS)
async def test_the_top_processes_are_whole(width: int) -> None:
    device = _native()
    split = split_card(device, server_pids={32591}, server_running=True, util=0.93)
    panel = VramSplitPanel()
    gpu = GpuReading(devices=(device,), source="nvml")
    lines = await _lines(panel, width, lambda: panel.show(gpu, split, RUNNING))
    for fact in (
        "VLLM::EngineCore (32591) 26.0",
        "zoom (4194402) 2.6",
        "gnome-shell (4194400) 1.0",
    ):
        assert any(fact in line for line in lines), (fact, lines)


@pytest.mark.parametrize("width", [34, 56])  # the throughput panel at 80 and 120 columns
@pytest.mark.parametrize("origin", ["learned now", "remembered 2 h ago", "can't judge yet"])
def test_where_the_normal_came_from_is_never_dropped(width: int, origin: str) -> None:
    # Seen on the Spark demo at 120 columns: a three-digit rate left no room for
    # "learned now", and the line went without it.
    row = _GenerationRow(1016.0, 1100.0, origin, each=116.0, normal_each=120.0)
    lines = row.lay_out(width)
    assert all(line.cell_length <= width for line in lines), [ln.plain for ln in lines]
    assert origin in _joined([line.plain for line in lines])
    for fact in ("1016 tok/s", "116/req", "normal 120"):  # each on one line, none cut
        assert any(fact in line.plain for line in lines), (fact, lines)


def test_one_line_where_it_fits() -> None:
    row = _GenerationRow(16.0, 16.0, "learned now", each=16.0, normal_each=15.0)
    assert [line.plain for line in row.lay_out(56)] == [
        "generation    16 tok/s  16/req · normal 15 · learned now"
    ]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
@pytest.mark.parametrize("happening", ["running", "not answering", "crashed"])
async def test_no_panel_line_is_wider_than_its_panel(size: tuple[int, int], happening: str) -> None:
    # The class: at 80 columns the throughput panel's "requests 1 running · 0 waiting (st…"
    # once the server had gone, and the KV pool's rows on the Spark's seven-digit figures.
    backend = FakeBackend()
    backend.pid = 4_194_302
    app = make_app(backend)
    async with app.run_test(size=size) as pilot:
        await ticks(pilot, 2)
        if happening == "not answering":
            backend.metrics_error = "/metrics did not answer within 2 s (a hang, or SIGSTOP)"
        elif happening == "crashed":
            backend.crash()
        await ticks(pilot, 2)
        wide = [
            (type(panel).__name__, line.plain)
            for panel in app.query(TextPanel)
            for line in panel.lines
            if line.cell_length > panel.content_region.width
        ]
        assert wide == []


@pytest.mark.parametrize("width", [34, 56])
def test_a_line_of_facts_breaks_between_them(width: int) -> None:
    line = Facts.split("126,341 blocks of 16 · KV dtype fp8 · 2,021,456 tokens (stale)")
    lines = [shown.plain for shown in line.lay_out(width)]
    assert all(len(shown) <= width for shown in lines), lines
    for fact in ("126,341 blocks of 16", "KV dtype fp8", "2,021,456 tokens (stale)"):
        assert any(fact in shown for shown in lines), (fact, lines)
