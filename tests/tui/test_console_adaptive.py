"""The console while a guard runs adaptively for its profile (Pilot): the throughput panel's
budget line, as wide as the panel lets it be, beside the door line; no line without such a
guard; the line follows the frames (the call ends, the guard leaves)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.support.console import make_app, ticks
from tests.support.fake_backend import FakeBackend
from tests.tui.test_console_door import SEEN
from vramtop.core.adaptive_words import AdaptiveState
from vramtop.core.model import Sample
from vramtop.tui.app import VramtopApp
from vramtop.tui.widgets.throughput_panel import ThroughputPanel, local_hhmm

DOWN = 1_700_000_000.0
UP = DOWN + 39 * 60


class AdaptiveBackend(FakeBackend):
    """The fake machine with an adaptive guard's state in its frames (None: no guard), and
    with a front door or none."""

    def __init__(self, state: AdaptiveState | None, door: bool = False) -> None:
        super().__init__()
        self.guard_state = state
        self.door = door

    def adaptive_state(self) -> AdaptiveState | None:
        return self.guard_state

    def next_sample(self) -> Sample:
        sample = super().next_sample()
        return replace(sample, door=SEEN) if self.door else sample


def panel_text(app: VramtopApp) -> str:
    rendered: Any = app.screen.query_one(ThroughputPanel).render()
    return str(getattr(rendered, "plain", rendered))


def budget_line(app: VramtopApp) -> str | None:
    lines = [line for line in panel_text(app).splitlines() if "budget: " in line]
    assert len(lines) <= 1, lines
    return lines[0].strip(" │┃") if lines else None


async def test_the_panel_says_both_budgets_and_the_last_steps() -> None:
    backend = AdaptiveBackend(AdaptiveState(0.93, 0.85, DOWN, UP), door=True)
    app = make_app(backend)
    async with app.run_test(size=(200, 50)) as pilot:  # the panel: 96 columns
        await ticks(pilot, 2)
        expected = (
            f"budget: 0.93 outside calls, 0.85 during; down {local_hhmm(DOWN)}, up {local_hhmm(UP)}"
        )
        assert budget_line(app) == expected, panel_text(app)
        assert "door: 2 in flight" in panel_text(app)  # both rows kept
        # A new call: stepped down, not up yet.
        backend.guard_state = AdaptiveState(0.93, 0.80, UP + 3600, None)
        await ticks(pilot, 1)
        line = budget_line(app)
        assert line is not None and line.endswith(
            f"0.80 during; down {local_hhmm(UP + 3600)}, up when the desktop has settled"
        ), line
        # The guard left (or stopped being adaptive): the line goes.
        backend.guard_state = None
        await ticks(pilot, 1)
        assert budget_line(app) is None, panel_text(app)
        assert "door: 2 in flight" in panel_text(app)


async def test_at_120_by_40_a_shorter_line_with_both_budgets() -> None:
    backend = AdaptiveBackend(AdaptiveState(0.93, 0.85, DOWN, None), door=True)
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 2)
        line = budget_line(app)
        assert line == f"budget: 0.93 outside calls, 0.85 during since {local_hhmm(DOWN)}", line
        width = app.screen.query_one(ThroughputPanel).content_region.width
        assert len(line) <= width


async def test_no_guard_no_budget_line() -> None:
    app = make_app(AdaptiveBackend(None))
    async with app.run_test(size=(160, 48)) as pilot:
        await ticks(pilot, 2)
        text = panel_text(app)
        assert "generation" in text and "budget" not in text, text


async def test_at_80_by_24_the_line_fits_with_the_door_row() -> None:
    backend = AdaptiveBackend(AdaptiveState(0.93, 0.85, DOWN, None), door=True)
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 2)
        panel = app.screen.query_one(ThroughputPanel)
        line = budget_line(app)
        assert line is not None, panel_text(app)
        assert line == f"budget: 0.85 since {local_hhmm(DOWN)}, then 0.93", line
        assert len(line) <= panel.content_region.width  # a shorter variant, never cut off
        assert "door: " in panel_text(app)
        assert panel.region.bottom <= 24
