"""The console through Pilot on each simulated machine (`--demo --card`): the DGX Spark shows
unified memory, the R9700 shows vLLM's memory evicted into GTT when a call needs the card."""

from __future__ import annotations

import pytest
from textual.pilot import Pilot

from tests.support.console import FAST, toggle_call, wait_for
from tests.support.waiting import PROCESS_S
from vramtop.core.model import MemoryKind, ServerState
from vramtop.machines.demo_backend import demo_backend
from vramtop.tui.app import VramtopApp
from vramtop.tui.widgets.console_header import ConsoleHeader
from vramtop.tui.widgets.vram_split_panel import UNIFIED_TITLE, VramSplitPanel

pytestmark = pytest.mark.usefixtures("sim_world")


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMTOP_SIM_SPEED", "10")


def running(app: VramtopApp) -> bool:
    s = app.sample
    info = s.info if s else None
    rates = s.rates if s else None
    return bool(
        info
        and info.state is ServerState.RUNNING
        and rates
        and rates.generation_tps
        and rates.generation_tps > 1
    )


def panel(app: VramtopApp) -> str:
    return "\n".join(line.plain for line in app.query_one(VramSplitPanel).lines)


async def quit_stopping(pilot: Pilot[int], app: VramtopApp) -> None:
    await pilot.press("q")
    await pilot.pause()
    await pilot.press("s")  # stop vLLM and the simulated machine
    await wait_for(pilot, lambda: not app.is_running, timeout=PROCESS_S)


@pytest.mark.slow
async def test_spark_console_says_unified_memory() -> None:
    backend, _ = demo_backend(card="spark")
    app = VramtopApp(backend, FAST)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: running(app))
        assert "GB10" in str(app.query_one(ConsoleHeader).render())
        vram = app.query_one(VramSplitPanel)
        assert vram.border_title == UNIFIED_TITLE
        assert app.sample is not None and app.sample.split is not None
        split = app.sample.split
        assert split.memory_kind is MemoryKind.UNIFIED
        assert split.total_bytes > 100 * 1024**3  # the shared pool, not a card
        desktop_before = split.desktop_bytes or 0
        await toggle_call(pilot)  # the pressure scenario: a build grows in system memory
        await wait_for(
            pilot,
            lambda: bool(
                app.sample
                and app.sample.split
                and (app.sample.split.desktop_bytes or 0) > desktop_before + 10 * 1024**3
            ),
        )
        await quit_stopping(pilot, app)


@pytest.mark.slow
async def test_r9700_console_shows_vllm_spilling_into_gtt() -> None:
    backend, _ = demo_backend(card="r9700")
    app = VramtopApp(backend, FAST)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: running(app))
        assert "R9700" in str(app.query_one(ConsoleHeader).render())
        assert app.query_one(VramSplitPanel).border_title == "VRAM split"

        def gtt() -> int:
            split = app.sample.split if app.sample else None
            return (split.server_gtt_bytes or 0) if split else 0

        assert gtt() == 0
        await toggle_call(pilot)  # a video call needs ~2.9 GiB of the card
        await wait_for(pilot, lambda: gtt() > 1024**3)
        assert "gtt: vLLM" in panel(app)
        await quit_stopping(pilot, app)
