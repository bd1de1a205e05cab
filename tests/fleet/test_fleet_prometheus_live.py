"""`vramtop fleet --prometheus URL` against a real Prometheus scraping three real
`vramtop export --demo --card …` processes: its rows agree with each box's own `vramtop fleet
--once --json NAME=URL` within one sample, and a box whose exporter stops reads unreachable
(never its last figures, which Prometheus still holds) while the others keep updating, in
`--once --json` and in the console (Pilot)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import DataTable

from tests.support.exporters import DemoExporter, demo_exporters
from tests.support.fleet_page import once_json
from tests.support.prometheus import running_prometheus
from tests.support.waiting import PROCESS_S, wait_until, wait_until_async
from vramtop import cli
from vramtop.core.fleet_rows import Status
from vramtop.core.fleet_sources import Sources
from vramtop.tui.fleet.fleet_app import FleetApp

pytestmark = pytest.mark.slow

BOXES = {"desk": "5090", "spark": "spark", "r9700": "r9700"}
# What a box's row says the same whichever way it is read, sample after sample.
STEADY = ("card", "platform", "model", "server_state", "budget_bytes", "budget_ratio")
# What moves with each sample: compared where both reads saw the same sample.
MOVING = ("kv_cache_usage_ratio", "desktop_headroom_bytes", "request_decode_tokens_per_second")
Row = dict[str, object]


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[list[DemoExporter], str]]:
    """The three exporters and the URL of a Prometheus that scrapes them (a `box` label each).
    A test's own: one test stops an exporter, which another run after it would find down."""
    with demo_exporters(tmp_path, BOXES) as started:
        targets = [(f"127.0.0.1:{one.port}", {"box": one.name}) for one in started]
        with running_prometheus(tmp_path, targets) as base:
            yield started, base


def by_name(rows: list[Row]) -> dict[str, Row]:
    return {str(row["name"]): row for row in rows}


def through_prometheus(
    capsys: pytest.CaptureFixture[str], prometheus: str, said: list[str]
) -> list[dict[str, object]] | None:
    """`fleet --once --json --prometheus`'s rows; None where Prometheus did not answer within
    the read's 1.5 s (a busy machine's: not these tests' subject; what it said kept in
    `said`, to be asked again)."""
    capsys.readouterr()
    if cli.main(["fleet", "--once", "--json", "--prometheus", prometheus]) != 0:
        said.append(capsys.readouterr().err.strip())
        return None
    rows = json.loads(capsys.readouterr().out)
    assert isinstance(rows, list)
    return rows


def test_rows_through_prometheus_agree_with_each_boxs_own_within_one_sample(
    fleet: tuple[list[DemoExporter], str], capsys: pytest.CaptureFixture[str]
) -> None:
    exporters, prometheus = fleet
    same_sample: dict[str, tuple[Row, Row]] = {}
    said: list[str] = []  # what a read through Prometheus that failed said

    def agreeing() -> bool:
        """Each box seen by Prometheus within one sample of its own read right after; a
        pair that saw the very same sample kept for its moving figures."""
        read = through_prometheus(capsys, prometheus, said)
        if read is None:
            return False
        through = by_name(read)
        own = by_name(once_json(capsys, *(one.box for one in exporters)))
        if set(through) != set(BOXES) or any(r["status"] != "up" for r in through.values()):
            return False
        for name, row in through.items():
            mine = own[name]
            assert mine["status"] == "up", mine
            gap = int(str(mine["samples"])) - int(str(row["samples"]))
            assert gap >= 0, (name, row["samples"], mine["samples"])  # read after it
            if gap > 2:
                # Read more than a sample apart (a busy machine's slow reads, a late scrape):
                # no pair to compare yet. The agreement is a pair that saw the same sample.
                return False
            if gap == 0:
                same_sample[name] = (row, mine)
            for key in STEADY:
                assert row[key] == mine[key], (name, key, row[key], mine[key])
        return set(same_sample) == set(BOXES)

    wait_until(
        agreeing,
        deadline_s=180,
        what=lambda: f"a same-sample pair per box: {same_sample} (failed reads: {said[-3:]})",
    )
    for name, (row, mine) in same_sample.items():
        assert row["source"] == "prometheus" and mine["source"] == "exporter"
        address = str(mine["url"]).removeprefix("http://").removesuffix("/metrics")
        assert row["instance"] == address
        for key in MOVING:
            assert row[key] == mine[key], (name, key, row[key], mine[key])
    cards = {name: (row["card"], row["platform"]) for name, (row, _) in same_sample.items()}
    assert cards == {
        "desk": ("NVIDIA GeForce RTX 5090", "native"),
        "spark": ("NVIDIA GB10", "unified"),
        "r9700": ("AMD Radeon AI PRO R9700", "ROCm"),
    }


def shown(app: FleetApp, name: str) -> list[str]:
    return [str(cell) for cell in app.query_one(DataTable).get_row(name)]


async def test_a_stopped_exporter_reads_unreachable_through_prometheus(
    fleet: tuple[list[DemoExporter], str], capsys: pytest.CaptureFixture[str]
) -> None:
    exporters, prometheus = fleet
    app = FleetApp(Sources(prometheus=prometheus))
    async with app.run_test(size=(120, 40)) as pilot:

        def rows() -> dict[str, object]:
            return {row.name: row for row in app.rows()}

        await wait_until_async(
            lambda: (
                set(rows()) == set(BOXES) and all(row.status is Status.UP for row in app.rows())
            ),
            deadline_s=60,
            what=lambda: f"every box up through Prometheus: {app.rows()}",
            pause=pilot.pause,
        )
        exporters[1].stop()  # spark: Prometheus still holds its last figures
        await wait_until_async(
            lambda: shown(app, "spark")[2] == "unreachable",
            deadline_s=PROCESS_S,
            what=lambda: f"spark's row unreachable: {shown(app, 'spark')}",
            pause=pilot.pause,
        )
        cells = shown(app, "spark")
        assert not any(c.isdigit() for c in "".join(cells[3:-1])), cells
        seen = {row.name: row.samples or 0 for row in app.rows() if row.name != "spark"}
        await wait_until_async(
            lambda: all(
                row.samples is not None and row.samples > seen[row.name]
                for row in app.rows()
                if row.name in seen
            ),
            deadline_s=PROCESS_S,
            what=lambda: f"desk and r9700 updating after {seen}: {app.rows()}",
            pause=pilot.pause,
        )
        await pilot.press("q")
    assert app.return_code == 0

    said: list[str] = []
    read: list[list[dict[str, object]] | None] = [None]

    def answered() -> bool:
        read[0] = through_prometheus(capsys, prometheus, said)
        return read[0] is not None

    wait_until(answered, deadline_s=60, what=lambda: f"Prometheus answering: {said[-3:]}")
    assert read[0] is not None
    after = by_name(read[0])
    spark = after["spark"]
    assert spark["status"] == "unreachable", spark
    figures = ("card", "budget_bytes", "kv_cache_usage_ratio", "desktop_headroom_bytes")
    assert all(spark[key] is None for key in figures) and spark["open_findings"] == []
    assert [after[name]["status"] for name in ("desk", "r9700")] == ["up", "up"]
