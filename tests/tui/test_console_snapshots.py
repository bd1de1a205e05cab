"""SVG snapshots of the console at 80×24 and 160×48: fixed clock, seeded data, no wall time.

Record with `pytest tests/tui/test_console_snapshots.py --snapshot-update` after a deliberate
change, and look at the report before committing the new SVGs.
"""

from __future__ import annotations

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from tests.support.console import make_app, settle, ticks, toggle_call
from tests.support.fake_backend import FakeBackend

SIZES = [(80, 24), (160, 48)]
# The banner wraps its words: also at 120 columns, where its second line was cut.
BANNER_SIZES = [*SIZES, (120, 40)]
HISTORY_TICKS = 24


async def _warm(pilot: Pilot[int]) -> None:
    await ticks(pilot, HISTORY_TICKS)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_main_screen(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app(), terminal_size=size, run_before=_warm)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_budget_dialog(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    async def open_dialog(pilot: Pilot[int]) -> None:
        await _warm(pilot)
        await pilot.press("b", "minus", "minus", "minus", "minus")
        pilot.app.screen.query_one(Input).cursor_blink = False
        await settle(pilot)

    assert snap_compare(make_app(), terminal_size=size, run_before=open_dialog)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help_screen(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    async def open_help(pilot: Pilot[int]) -> None:
        await _warm(pilot)
        await pilot.press("question_mark")
        await settle(pilot)

    assert snap_compare(make_app(), terminal_size=size, run_before=open_help)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_crashed_server(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    backend = FakeBackend()

    async def crash(pilot: Pilot[int]) -> None:
        await _warm(pilot)
        backend.crash()
        await ticks(pilot, 3)

    assert snap_compare(make_app(backend), terminal_size=size, run_before=crash)


@pytest.mark.parametrize("size", BANNER_SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_collapse_banner(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    backend = FakeBackend()

    async def collapse(pilot: Pilot[int]) -> None:
        await _warm(pilot)
        await toggle_call(pilot)
        await ticks(pilot, 6)

    assert snap_compare(make_app(backend), terminal_size=size, run_before=collapse)


@pytest.mark.parametrize("size", BANNER_SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_collapse_banner_details(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    backend = FakeBackend()

    async def collapse(pilot: Pilot[int]) -> None:
        await _warm(pilot)
        await toggle_call(pilot)
        await ticks(pilot, 6)
        await pilot.press("d")
        await settle(pilot)

    assert snap_compare(make_app(backend), terminal_size=size, run_before=collapse)
