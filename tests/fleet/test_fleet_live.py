"""`vramtop fleet` against three real `vramtop export --demo --card …` processes: its rows
agree with each box's own page, a box that stops reads unreachable while the others keep
updating, in `--once --json` and in the console (Pilot, 120×40 and 80×24)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import DataTable

from tests.support.exporters import DemoExporter, demo_exporters
from tests.support.fleet_page import once_json
from tests.support.waiting import PROCESS_S, wait_until, wait_until_async
from vramtop.core.fleet_rows import BoxRow, Status
from vramtop.core.fleet_sources import Box
from vramtop.tui.fleet.cells import COLUMNS
from vramtop.tui.fleet.fleet_app import FleetApp

pytestmark = pytest.mark.slow

BOXES = {"desk": "5090", "spark": "spark", "r9700": "r9700"}


@pytest.fixture
def exporters(tmp_path: Path) -> Iterator[list[DemoExporter]]:
    with demo_exporters(tmp_path, BOXES) as started:
        yield started


def value(page: str, name: str) -> float | None:
    """A series' value read straight off a page (by hand: not the fleet's own parser)."""
    match = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", page, re.M)
    return float(match.group(1)) if match else None


def test_once_json_agrees_with_each_boxs_page_and_a_stopped_box_reads_unreachable(
    exporters: list[DemoExporter], capsys: pytest.CaptureFixture[str]
) -> None:
    boxes = [exporter.box for exporter in exporters]

    # Each box's row, kept from a fleet read that saw the same sample as that box's page read
    # just before and just after it. Each box is waited for on its own: under load one read of
    # three boxes takes long enough that some box nearly always samples during it.
    agreed: dict[str, dict[str, object]] = {}
    seen: list[str] = []  # the last read's rows, for the message
    order: list[object] = []  # the boxes in the fleet's rows, as it listed them

    def agreeing() -> bool:
        before = [exporter.page() for exporter in exporters]
        rows = once_json(capsys, *boxes)
        after = [exporter.page() for exporter in exporters]
        seen[:] = [f"{row['name']}: {row['samples']} {row['server_state']}" for row in rows]
        order[:] = [row["name"] for row in rows]
        for b, row, a in zip(before, rows, after, strict=True):
            same = value(b, "vramtop_samples_total") == row["samples"]
            same = same and row["samples"] == value(a, "vramtop_samples_total")
            # (a page serves once its server answers; on a loaded machine its record can still
            # say `starting` for a sample or two until the load's follower settles it)
            if same and row["server_state"] == "running":
                agreed.setdefault(str(row["name"]), dict(row, page=b))
        return len(agreed) == len(BOXES)

    wait_until(
        agreeing,
        deadline_s=60,
        what=lambda: f"each box's row on the sample its page showed: {sorted(agreed)}, {seen}",
    )
    assert order == list(BOXES)
    rows = [agreed[name] for name in BOXES]
    for row in rows:
        page = str(row["page"])
        assert row["status"] == "up" and isinstance(row["query_time"], float)
        assert row["budget_bytes"] == value(page, "vramtop_budget_bytes")
        assert row["budget_ratio"] == value(page, "vramtop_budget_ratio")
        assert row["desktop_headroom_bytes"] == value(page, "vramtop_desktop_headroom_bytes")
        assert row["kv_cache_usage_ratio"] == value(page, "vramtop_kv_cache_usage_ratio")
        assert row["server_state"] == "running" and row["open_findings"] == []
    cards = {row["name"]: (row["card"], row["platform"]) for row in rows}
    assert cards == {
        "desk": ("NVIDIA GeForce RTX 5090", "native"),
        "spark": ("NVIDIA GB10", "unified"),
        "r9700": ("AMD Radeon AI PRO R9700", "ROCm"),
    }

    exporters[1].stop()
    # One read each (the command's own), until the running two read up: a read of a box on
    # a busy machine can take past its timeout, or find its sample just past stale.
    rows = wait_until(
        lambda: (
            (read := once_json(capsys, *boxes))
            and [row["status"] for row in (read[0], read[2])] == ["up", "up"]
            and read
        ),
        deadline_s=PROCESS_S,
        what="desk and r9700 up beside the stopped spark",
        poll_s=0.5,
    )
    spark = rows[1]
    assert spark["status"] == "unreachable" and "no answer" in str(spark["problem"])
    figures = ("card", "budget_bytes", "kv_cache_usage_ratio", "desktop_headroom_bytes")
    assert all(spark[name] is None for name in figures) and spark["open_findings"] == []
    assert [row["status"] for row in (rows[0], rows[2])] == ["up", "up"]


def shown(app: FleetApp, name: str) -> list[str]:
    table = app.query_one(DataTable)
    return [str(cell) for cell in table.get_row(name)]


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_console_keeps_updating_the_others_when_a_box_stops(
    exporters: list[DemoExporter], size: tuple[int, int]
) -> None:
    boxes = [Box(exporter.name, exporter.url) for exporter in exporters]
    app = FleetApp(boxes)
    async with app.run_test(size=size) as pilot:

        def rows() -> dict[str, BoxRow]:
            return {row.name: row for row in app.rows()}

        await wait_until_async(
            lambda: (
                all(shown(app, name)[1] not in ("", "—") for name in BOXES)
                and all(row.status is Status.UP for row in rows().values())
            ),
            deadline_s=60,
            what=lambda: f"every box up: {rows()}",
            pause=pilot.pause,
        )
        assert shown(app, "spark")[2] == "GB10"
        assert shown(app, "r9700")[COLUMNS.index("platform")] == "ROCm"

        exporters[1].stop()
        await wait_until_async(
            lambda: shown(app, "spark")[2] == "unreachable",
            deadline_s=60,
            what=lambda: f"spark's row unreachable: {shown(app, 'spark')}",
            pause=pilot.pause,
        )
        cells = shown(app, "spark")
        assert not any(c.isdigit() for c in "".join(cells[3:-1])), cells
        # The others go on: a newer sample than the one shown when spark went down.
        seen = {name: rows()[name].samples or 0 for name in ("desk", "r9700")}
        await wait_until_async(
            lambda: all((rows()[name].samples or 0) > seen[name] for name in seen),
            deadline_s=60,
            what=lambda: f"desk and r9700 updating after {seen}: {rows()}",
            pause=pilot.pause,
        )
        assert rows()["spark"].status is Status.UNREACHABLE
        await pilot.press("q")
    assert app.return_code == 0
