"""The fleet console (Pilot, 120×40 and 80×24) against boxes served in the test: a box that
hangs never holds the others' rows, a collapse shows the banner naming its box, q quits; and
`vramtop fleet`'s bad input."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator

import pytest
from textual.widgets import DataTable, Static

from tests.support.fleet_page import FakeExporter
from tests.support.waiting import PROCESS_S, wait_until_async
from vramtop import cli
from vramtop.core.fleet_rows import BoxRow, Status
from vramtop.core.fleet_sources import Box, Sources
from vramtop.core.news import News
from vramtop.notify.notifier import Notifier
from vramtop.sources.fleet_client import fetch
from vramtop.sources.fleet_prometheus import Read
from vramtop.tui.fleet.cells import COLUMNS
from vramtop.tui.fleet.fleet_app import FleetApp, PrometheusRead, RowFetched

SIZES = [(120, 40), (80, 24)]


@pytest.fixture
def hung() -> Iterator[str]:
    """A box that takes the connection and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/metrics"
    listener.close()


def shown(app: FleetApp, name: str) -> list[str]:
    return [str(cell) for cell in app.query_one(DataTable).get_row(name)]


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES)
async def test_a_hung_box_never_holds_the_others_and_reads_unreachable(
    box: FakeExporter, hung: str, size: tuple[int, int]
) -> None:
    app = FleetApp([Box("r9700", box.url), Box("hung", hung)], timeout_s=5.0, refresh_s=0.2)
    async with app.run_test(size=size) as pilot:
        # While the hung box's one request waits for its 5 s, r9700 is read again and again.
        await wait_until_async(
            lambda: box.samples >= 3 and shown(app, "r9700")[2] == "AI PRO R9700",
            deadline_s=PROCESS_S,
            what=lambda: f"r9700 read 3 times: {box.samples}, {shown(app, 'r9700')}",
            pause=pilot.pause,
        )
        assert app.rows()[1].status is not Status.UP
        assert not any(ch.isdigit() for ch in "".join(shown(app, "hung")[3:-1]))
        # Once its last answer is older than the stale limit, it says it has not answered.
        await wait_until_async(
            lambda: shown(app, "hung")[2] == "unreachable",
            deadline_s=PROCESS_S,
            what=lambda: f"the hung box unreachable: {shown(app, 'hung')}",
            pause=pilot.pause,
        )
        assert shown(app, "hung")[-1].startswith("no answer")
        # (r9700's row, aged when read: its next answer is waited for, not assumed.)
        await wait_until_async(
            lambda: app.rows()[0].status is Status.UP,
            deadline_s=PROCESS_S,
            what=lambda: f"r9700 up: {app.rows()[0]}",
            pause=pilot.pause,
        )
        await pilot.press("q")
    assert app.return_code == 0


class Told:
    """A notification sender that keeps what it was given."""

    name = "told"

    def __init__(self) -> None:
        self.news: list[News] = []

    def send(self, news: News) -> None:
        self.news.append(news)


@pytest.mark.parametrize("size", SIZES)
async def test_a_collapse_shows_the_banner_naming_its_box_and_is_told_once(
    box: FakeExporter, size: tuple[int, int]
) -> None:
    told = Told()
    notifier = Notifier([told])
    app = FleetApp([Box("r9700", box.url)], refresh_s=0.2, notifier=notifier)
    async with app.run_test(size=size) as pilot:
        await wait_until_async(
            lambda: app.rows()[0].status is Status.UP,
            deadline_s=PROCESS_S,
            what="r9700 up",
            pause=pilot.pause,
        )
        # (asked once the box is up: on a busy machine the screen was not composed yet)
        banner = app.query_one("#banner", Static)
        assert not banner.has_class("shown")
        box.collapse = True
        await wait_until_async(
            lambda: banner.has_class("shown"),
            deadline_s=PROCESS_S,
            what="the banner",
            pause=pilot.pause,
        )
        assert "collapse on r9700" in str(banner.render())
        assert "collapse" in shown(app, "r9700")[COLUMNS.index("findings")]
        # Told once, however many refreshes still show it.
        seen = box.samples
        await wait_until_async(
            lambda: box.samples >= seen + 3,
            deadline_s=PROCESS_S,
            what="3 more reads",
            pause=pilot.pause,
        )
        notifier.flush()
        assert [news.title for news in told.news] == ["vramtop fleet: collapse on r9700"]
        box.collapse = False
        await wait_until_async(
            lambda: not banner.has_class("shown"),
            deadline_s=PROCESS_S,
            what="the banner gone once the collapse closed",
            pause=pilot.pause,
        )


@pytest.mark.parametrize("size", SIZES)
async def test_a_down_boxs_reason_is_shown_whole_on_screen(
    box: FakeExporter, size: tuple[int, int]
) -> None:
    stuck = FakeExporter(sampled_at=time.time() - 100)  # a sampler stuck 100 s ago
    # Port 9 (discard): refused on this machine, as a box whose exporter is stopped.
    boxes = [Box("r9700", box.url), Box("spark", stuck.url), Box("gone", "http://127.0.0.1:9/")]
    app = FleetApp(boxes, refresh_s=0.2)
    try:
        async with app.run_test(size=size) as pilot:
            down = app.query_one("#down", Static)
            # The rows are aged when read and the line drawn at the last show: both are
            # waited for together (a late answer from r9700 on a busy machine adds its line).
            await wait_until_async(
                lambda: (
                    [row.status for row in app.rows()]
                    == [Status.UP, Status.STALE, Status.UNREACHABLE]
                    and [line.split()[0] for line in str(down.render()).splitlines()]
                    == ["spark", "gone"]
                ),
                deadline_s=PROCESS_S,
                what=lambda: f"r9700 up, spark stale, gone unreachable: {app.rows()}",
                pause=pilot.pause,
            )
            gone = app.rows()[2]
            assert gone.problem  # the fetch's reason (refused)
            words = str(down.render())
            spark_line, gone_line = words.splitlines()
            assert re.fullmatch(r"spark stale: sample 1\d\d s old", spark_line)
            assert gone_line == f"gone unreachable: {gone.problem}"
            # On screen, whole: within the terminal, with room for every line (each wraps).
            region = down.region
            assert region.bottom <= size[1] and region.right <= size[0]
            assert region.height >= sum(
                -(-len(line) // (region.width - 2)) for line in words.splitlines()
            )
            # A box that samples again drops its line.
            stuck.sampled_at = None
            await wait_until_async(
                lambda: str(down.render()) == f"gone unreachable: {gone.problem}",
                deadline_s=PROCESS_S,
                what=lambda: f"only gone's line: {down.render()!s}",
                pause=pilot.pause,
            )
    finally:
        stuck.close()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "name at least one box"),
        (["desk"], "NAME=URL"),
        (["desk=localhost:9464"], "http://HOST:PORT"),
        (["a=http://x:1", "a=http://y:1"], "names two boxes"),
        (["--json", "a=http://x:1"], "--json prints once: add --once"),
        (["--timeout", "0", "a=http://x:1"], "--timeout must be"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["fleet", *args]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_once_prints_a_line_per_box(box: FakeExporter, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fleet", "--once", f"r9700={box.url}", "gone=http://127.0.0.1:9"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("box") and len(lines) == 3
    assert "AI PRO R9700" in lines[1] and "holding 3" in lines[1]
    assert lines[2].split()[:2] == ["gone", "unreachable:"]


def test_a_fetch_reads_the_boxs_clock_from_its_answer(box: FakeExporter) -> None:
    before = time.time()
    got = fetch(Box("r9700", box.url))
    after = time.time()
    assert got.text is not None and got.error is None
    # The Date header, to the second, of an answer given between the two readings of this
    # machine's clock (the box's here); the fetch's own time once it was answered. (An order
    # of readings, not a duration: a slow fetch on a busy machine cannot fail it.)
    assert got.box_time is not None and int(before) <= got.box_time <= after
    assert before <= got.query_time <= after
    gone = fetch(Box("gone", "http://127.0.0.1:9/metrics"))
    assert gone.text is None and gone.box_time is None and gone.error


async def test_an_answer_shown_while_the_console_closes_is_dropped(box: FakeExporter) -> None:
    """Closing, the console's widgets go one by one: an answer handled then (the table still
    there, the banner gone) has nowhere to go and is dropped, not raised."""
    app = FleetApp([Box("r9700", box.url)], refresh_s=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until_async(
            lambda: app.fetches == 1, deadline_s=PROCESS_S, what="the box read", pause=pilot.pause
        )
        await app.query_one("#banner", Static).remove()
        await app.query_one("#source", Static).remove()
        app._show()
        assert app.query_one(DataTable).row_count == 1
        # And with the table gone too: the answer is recorded, nothing is drawn or raised.
        (row,) = app.rows()
        await app.query_one(DataTable).remove()
        app.on_row_fetched(RowFetched(row, None))
        assert app.fetches == 2


async def test_a_box_prometheus_names_first_gets_its_row_and_a_late_read_is_dropped() -> None:
    """Through Prometheus, a box named for the first time gets its row at that read's show;
    a read handled while the console closes (its source line and table gone) is recorded and
    drawn nowhere, not raised."""
    app = FleetApp(Sources(prometheus="http://127.0.0.1:9"), refresh_s=3600)

    def answer(*names: str) -> PrometheusRead:
        rows = tuple(
            (BoxRow(name, "", Status.UNREACHABLE, time.time(), "down"), None) for name in names
        )
        return PrometheusRead(Read(query_time=time.time(), rows=rows, error="gave nothing"))

    async with app.run_test(size=(120, 40)) as pilot:
        source = app.query_one("#source", Static)
        await wait_until_async(  # the console's own first read, refused, told on its line
            lambda: " · " in str(source.render()),
            deadline_s=PROCESS_S,
            what="the first read's problem",
            pause=pilot.pause,
        )
        app.on_prometheus_read(answer("spark", "r9700"))
        await pilot.pause()
        table = app.query_one(DataTable)
        assert [str(key.value) for key in table.rows] == ["spark", "r9700"]
        assert "gave nothing" in str(source.render())
        await source.remove()
        await table.remove()
        app.on_prometheus_read(answer("spark", "r9700", "home"))
        assert [row.name for row in app.rows()] == ["spark", "r9700", "home"]
