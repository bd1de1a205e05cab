"""The VRAM panel's line of what the card says it does: `PCIe RX 12.1 GB/s · GPU 97 % ·
mem 41 %` where the driver gives the figures, nothing where it does not; and the demo shows
it, read from the simulated card."""

from __future__ import annotations

from textual.app import App, ComposeResult

from tests.support.waiting import PROCESS_S, wait_until_async
from vramtop.core.card_activity import activity_line
from vramtop.core.model import (
    GIB,
    GpuDevice,
    GpuReading,
    ServerInfo,
    ServerState,
    Split,
    SplitMethod,
)
from vramtop.machines.demo_backend import demo_backend
from vramtop.machines.demo_world import stop_demo_world
from vramtop.settings import Settings
from vramtop.tui.app import VramtopApp
from vramtop.tui.widgets.vram_split_panel import VramSplitPanel

TOTAL = 32 * GIB
SPLIT = Split(
    total_bytes=TOTAL,
    server_bytes=30 * GIB,
    desktop_bytes=1 * GIB,
    free_bytes=1 * GIB,
    method=SplitMethod.DERIVED,
    detail="derived from the budget",
    budget_bytes=30 * GIB,
)
RUNNING = ServerInfo(state=ServerState.RUNNING, pid=7)


def card(**figures: object) -> GpuDevice:
    return GpuDevice(0, "NVIDIA GeForce RTX 5090", TOTAL, 31 * GIB, 1 * GIB, **figures)  # type: ignore[arg-type]


def test_the_line_names_only_the_figures_the_card_gave() -> None:
    busy = card(pcie_rx_bytes_per_s=12_100_000_000, gpu_util=0.97, memory_util=0.41)
    assert activity_line(busy) == "PCIe RX 12.1 GB/s · GPU 97 % · mem 41 %"
    assert activity_line(card(gpu_util=0.97, memory_util=0.41)) == "GPU 97 % · mem 41 %"
    assert activity_line(card(pcie_rx_bytes_per_s=300_000_000)) == "PCIe RX 0.3 GB/s"
    assert activity_line(card()) is None


async def _panel_lines(device: GpuDevice) -> list[str]:
    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield VramSplitPanel()

    app = One()
    async with app.run_test(size=(100, 14)) as pilot:
        panel = app.query_one(VramSplitPanel)
        panel.show(GpuReading(devices=(device,), source="nvml"), SPLIT, RUNNING)
        await pilot.pause()
        return [line.plain for line in panel.lines]


async def test_the_panel_shows_the_line_where_known_and_nothing_where_not() -> None:
    busy = card(pcie_rx_bytes_per_s=12_100_000_000, gpu_util=0.97, memory_util=0.41)
    known = await _panel_lines(busy)
    unknown = await _panel_lines(card())
    assert "PCIe RX 12.1 GB/s · GPU 97 % · mem 41 %" in known
    assert not any("PCIe" in line or "GPU 9" in line for line in unknown)
    # The same panel otherwise: one row more, nothing else moved.
    assert [line for line in known if "PCIe" not in line] == unknown


async def test_the_demo_shows_what_the_simulated_card_does() -> None:
    backend, _ = demo_backend(wsl=False)
    app = VramtopApp(backend, Settings(interval_s=0.25))
    try:
        async with app.run_test(size=(120, 40)) as pilot:

            def shown() -> str:
                return "\n".join(line.plain for line in app.query_one(VramSplitPanel).lines)

            await wait_until_async(
                lambda: "PCIe RX" in shown(),
                deadline_s=PROCESS_S,
                what=lambda: f"PCIe RX shown:\n{shown()}",
                pause=pilot.pause,
                poll_s=0.1,
            )
            text = shown()
            assert "PCIe RX" and "GPU" in text and "mem" in text, text
    finally:
        backend.close(stop_server=True)  # its housekeeping too (`closed_at_end`)
        stop_demo_world()
