"""Enter on a box's row shows its panels, read-only, fed from its exporter's page each second
(the console's VRAM bar and text panels); a box that stops answering shows why and no
figure; Escape goes back to the rows; `e` shows the steps the box's exporter serves, and says
where it serves none, rather than showing any. Pilot at 120×40 and 80×24."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from textual.pilot import Pilot
from textual.widgets import Static

from tests.support.fleet_page import FakeExporter
from tests.support.waiting import PROCESS_S, wait_until_async
from vramtop.core.fleet_rows import Status
from vramtop.core.fleet_sources import Box
from vramtop.core.server_events import Event
from vramtop.core.step_report import StepCounts, count_steps, latest_steps
from vramtop.core.supervision_series import step_series
from vramtop.export.exporter import families
from vramtop.tui.fleet.box_screen import BoxScreen, StepsScreen
from vramtop.tui.fleet.fleet_app import FleetApp
from vramtop.tui.widgets.text_panel import TextPanel
from vramtop.tui.widgets.throughput_panel import local_hhmm

SIZES = [(120, 40), (80, 24)]


def panel_text(screen: BoxScreen, panel_id: str) -> str:
    return "\n".join(line.plain for line in screen.query_one(f"#{panel_id}", TextPanel).lines)


def status_text(screen: BoxScreen) -> str:
    return str(screen.query_one("#box-status", Static).render())


@pytest.mark.parametrize("size", SIZES)
async def test_enter_shows_the_boxs_panels_and_escape_returns(
    box: FakeExporter, size: tuple[int, int]
) -> None:
    app = FleetApp([Box("other", "http://127.0.0.1:9/metrics"), Box("r9700", box.url)])
    async with app.run_test(size=size) as pilot:
        await wait_until_async(
            lambda: any(row.status is Status.UP for row in app.rows()),
            deadline_s=PROCESS_S,
            what=lambda: f"r9700 up: {app.rows()}",
            pause=pilot.pause,
        )
        await pilot.press("down", "enter")  # the second row: r9700
        screen = app.screen
        assert isinstance(screen, BoxScreen) and screen.box == "r9700"
        await wait_until_async(
            lambda: "usage 25.0 %" in panel_text(screen, "kv"),
            deadline_s=PROCESS_S,
            what=lambda: f"the KV panel: {panel_text(screen, 'kv')!r}",
            pause=pilot.pause,
        )
        assert "AI PRO R9700" in status_text(screen) and "read-only" in status_text(screen)
        vram = panel_text(screen, "vram")
        assert "vLLM 27.5" in vram and "desktop/other 2.5" in vram and "of 31.9 GiB" in vram
        assert "15.00 GiB · 163,840 tokens" in panel_text(screen, "kv")
        assert "generation 76 tok/s" in panel_text(screen, "rates")
        assert "per request 38 tok/s (normal 41)" in panel_text(screen, "rates")
        assert "kv_pressure" in panel_text(screen, "counted")
        assert "restarts 2" in panel_text(screen, "counted")

        box.close()  # the box stops answering: its panels show no figure of before
        await wait_until_async(
            lambda: "unreachable" in status_text(screen),
            deadline_s=PROCESS_S,
            what=lambda: f"the box unreachable: {status_text(screen)!r}",
            pause=pilot.pause,
        )
        for panel in ("vram", "kv", "rates", "counted"):
            assert not any(ch.isdigit() for ch in panel_text(screen, panel)), panel
        assert "no figures shown" in status_text(screen)

        await pilot.press("escape")
        assert not isinstance(app.screen, BoxScreen)
        await pilot.press("q")
    assert app.return_code == 0


async def steps_of_r9700(app: FleetApp, pilot: Pilot[None]) -> StepsScreen:
    """`e` pressed once the r9700's page is read: its steps' screen, once it shows a fresh
    page (a busy machine can leave the box's next answer later than the 3 s a row stays
    fresh, and the screen then rightly shows none)."""
    await wait_until_async(
        lambda: app.page("r9700") is not None,
        deadline_s=PROCESS_S,
        what=lambda: f"r9700 up: {app.rows()}",
        pause=pilot.pause,
    )
    await pilot.press("e")
    screen = app.screen
    assert isinstance(screen, StepsScreen)
    steps = screen.query_one("#steps", Static)
    await wait_until_async(
        lambda: "no steps shown" not in str(steps.render()),
        deadline_s=PROCESS_S,
        what=lambda: f"the steps of a fresh page: {steps.render()!s}",
        pause=pilot.pause,
    )
    return screen


@pytest.mark.parametrize("size", SIZES)
async def test_e_says_the_exporter_does_not_serve_the_boxs_steps(
    box: FakeExporter, size: tuple[int, int]
) -> None:
    app = FleetApp([Box("r9700", box.url)])
    async with app.run_test(size=size) as pilot:
        screen = await steps_of_r9700(app, pilot)
        words = str(screen.query_one("#steps", Static).render())
        assert "r9700's exporter does not serve its steps" in words
        await pilot.press("escape", "enter", "e")  # from the box's panels too
        assert isinstance(app.screen, StepsScreen)
        await pilot.press("escape", "escape")
        assert not isinstance(app.screen, BoxScreen | StepsScreen)


def served_steps() -> str:
    """The step series as `vramtop export` writes them (its own exposition and families): a
    restart before the exporter started, then two relaunches the guard asked for and a
    restart by a key since."""
    before = [Event(NOW - 3600, "restart", {"result": "ok", "asked_by": "key", "phases": {}})]
    since = [
        Event(NOW - 600, "relaunch", {"result": "rolled_back", "asked_by": "guard", "phases": {}}),
        Event(NOW - 60, "relaunch", {"result": "ok", "asked_by": "guard", "phases": STEP}),
        Event(NOW - 30, "restart", {"result": "ok", "asked_by": "key", "phases": {}}),
    ]
    counts = count_steps(StepCounts.start(latest_steps({}, before)), since)

    class Steps:
        def collect(self) -> Iterator[Metric]:
            yield from families(step_series(counts))

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Steps())  # type: ignore[arg-type]
    return generate_latest(registry).decode()


NOW = 1_800_000_000.0
STEP = {"total_s": 41.5}


@pytest.mark.parametrize("size", SIZES)
async def test_e_shows_the_steps_the_boxs_exporter_serves(
    box: FakeExporter, size: tuple[int, int]
) -> None:
    box.extra = served_steps()
    app = FleetApp([Box("r9700", box.url)])
    async with app.run_test(size=size) as pilot:
        screen = await steps_of_r9700(app, pilot)
        steps = screen.query_one("#steps", Static)
        lines = str(steps.render()).splitlines()
        assert lines[1:] == [
            "start     none in its timeline · 0 counted",
            f"restart   last {local_hhmm(NOW - 30)} by key · ok · 1 counted (key 1)",
            f"relaunch  last {local_hhmm(NOW - 60)} by guard · ok · 42 s · 2 counted (guard 2)",
        ]
        # On screen, each step's line whole.
        region = steps.content_region
        assert region.bottom <= size[1] and all(len(line) <= region.width for line in lines[1:])
        # A box that stops serving: no step of an earlier answer.
        box.sampled_at = time.time() - 3600  # its sampler stuck an hour ago
        await wait_until_async(
            lambda: "no steps shown" in str(steps.render()),
            deadline_s=PROCESS_S,
            what=lambda: f"the stale box: {steps.render()!s}",
            pause=pilot.pause,
        )
        assert "relaunch" not in str(steps.render())
        await pilot.press("escape")
        assert not isinstance(app.screen, StepsScreen)
