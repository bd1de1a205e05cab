"""SVG snapshots of the fleet console at 120×40 and 80×24: a box with its collapse open (the
banner, the row in the error colour) beside one that does not answer. Fixed clock, one read
of each box (the timer set an hour away), so nothing moves between runs.

Record with `pytest tests/fleet/test_fleet_snapshots.py --snapshot-update` after a deliberate
change, and look at the report before committing the new SVGs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from tests.support.fleet_page import FakeExporter
from tests.support.waiting import PROCESS_S, wait_until_async
from vramtop.core.fleet_sources import Box
from vramtop.tui.fleet.fleet_app import FleetApp

NOW = 1_800_000_000.0
SIZES = [(120, 40), (80, 24)]


@pytest.fixture
def collapsed() -> Iterator[FakeExporter]:
    exporter = FakeExporter(sampled_at=NOW)
    exporter.collapse = True
    yield exporter
    exporter.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_collapse_beside_a_box_that_is_down(  # type: ignore[no-untyped-def]
    snap_compare, collapsed: FakeExporter, size: tuple[int, int]
) -> None:
    boxes = [Box("r9700", collapsed.url), Box("gone", "http://127.0.0.1:9/metrics")]
    app = FleetApp(boxes, clock=lambda: NOW, refresh_s=3600)

    async def read_once(pilot: Pilot[None]) -> None:
        await wait_until_async(
            lambda: app.fetches == len(boxes),
            deadline_s=PROCESS_S,
            what="both boxes read",
            pause=pilot.pause,
        )
        # The table sizes its columns to the new cells when it is next idle, not when they
        # are set: until then it shows them cut to the widths of "asking…" (1 run in 8).
        table = app.query_one(DataTable)
        await wait_until_async(
            lambda: not (table._updated_cells or table._require_update_dimensions),
            deadline_s=PROCESS_S,
            what="the table's columns sized to the boxes' answers",
            pause=pilot.pause,
        )
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=read_once)
