"""The fleet console: a table of one row per box, a banner naming the boxes whose collapse is
open, and a line per box without figures saying why.

A collapse newly open on a box is also told through the local notifications (the guard's
senders), once per finding.

A timer triggers, workers fetch: each second every box whose previous fetch has come back
gets a thread worker of its own (one GET with its short timeout), which posts the box's new
row as a message. A box that hangs holds only its own worker; its row turns "no answer for
N s" once its last answer is older than the stale limit (`core.fleet.aged`), while the
others keep updating. Through Prometheus (`Sources.prometheus`), one worker a second asks
it for every box, and a box it names for the first time gets its row then.

An answer only records the row; every widget is drawn in one place (`_show`), which a
closing console, whose widgets go one by one, turns into nothing.

Enter on a row shows that box's panels (`BoxScreen`), `e` its recent steps where its
exporter serves them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import DataTable, Footer, Static

from vramtop.core.fleet_rows import BoxRow, Page, Status, aged, collapse_news, collapses, read_box
from vramtop.core.fleet_sources import Box, Sources
from vramtop.notify.notifier import Notifier
from vramtop.sources.fleet_client import TIMEOUT_S, fetch, http_client
from vramtop.sources.fleet_prometheus import Read, read
from vramtop.tui.fleet.box_screen import BoxScreen, StepsScreen
from vramtop.tui.fleet.cells import COLUMNS, cells, down_words
from vramtop.tui.widgets.measured_table import MeasuredTable

REFRESH_S = 1.0


class RowFetched(Message):
    """A box's new row (and its page where it is up), from its worker."""

    def __init__(self, row: BoxRow, page: Page | None) -> None:
        super().__init__()
        self.row = row
        self.page = page


class PrometheusRead(Message):
    """Every box's row, read through Prometheus, from its worker."""

    def __init__(self, answer: Read) -> None:
        super().__init__()
        self.answer = answer


class FleetApp(App[None]):
    """One row per box, refreshed every second, read-only."""

    TITLE = "vramtop fleet"
    CSS = """
    #banner { background: $error; color: $text; padding: 0 1; display: none; }
    #banner.shown { display: block; }
    #source { color: $text-muted; padding: 0 1; display: none; }
    #source.shown { display: block; }
    #down { color: $warning; padding: 0 1; display: none; }
    #down.shown { display: block; }
    DataTable { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("e", "steps", "Steps", id="steps"),
    ]

    def __init__(
        self,
        sources: Sources | list[Box],
        *,
        timeout_s: float = TIMEOUT_S,
        clock: Callable[[], float] = time.time,
        refresh_s: float = REFRESH_S,
        notifier: Notifier | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(sources, Sources):
            sources = Sources(boxes=tuple(sources))
        self._sources = sources
        # The boxes' names in the table's order (through Prometheus: as it names them).
        self._names = [box.name for box in sources.boxes]
        self._pages: dict[str, Page | None] = {}
        self._prometheus_problem: str | None = None
        self._http = http_client()  # one for every box and refresh (see http_client)
        self._shown: dict[str, list[Text]] = {}  # each row's cells as last shown
        self._banner = ""
        self._down = ""  # the down boxes' reasons as last shown
        self._source = ""  # the Prometheus line as last shown
        self._timeout_s = timeout_s
        self._clock = clock
        self._refresh_s = refresh_s
        self._rows: dict[str, BoxRow] = {}
        self._in_flight: set[str] = set()
        self._notifier = notifier
        self._told: frozenset[str] = frozenset()  # boxes whose open collapse was told
        self.fetches = 0  # rows received, for tests that wait for a refresh

    def compose(self) -> ComposeResult:
        yield Static(id="source")
        yield Static(id="banner")
        yield Static(id="down")
        yield MeasuredTable(id="fleet", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*COLUMNS)
        for box in self._sources.boxes:
            self._rows[box.name] = BoxRow(
                box.name, box.url, Status.NO_SAMPLE, self._clock(), "asking…"
            )
        self._tick()  # its show draws the rows
        self.set_interval(self._refresh_s, self._tick)

    # --- timers trigger, workers fetch ---------------------------------------------------------
    def _tick(self) -> None:
        prometheus = self._sources.prometheus
        if prometheus is None:
            for box in self._sources.boxes:
                if box.name not in self._in_flight:
                    self._in_flight.add(box.name)
                    self._fetch(box)
        elif prometheus not in self._in_flight:
            self._in_flight.add(prometheus)
            self._read_prometheus(prometheus)
        self._show()  # a box still in flight ages here

    @work(thread=True, exit_on_error=False, group="fleet")
    def _fetch(self, box: Box) -> None:
        fetched = fetch(box, timeout_s=self._timeout_s, clock=self._clock, client=self._http)
        row, page = read_box(fetched)
        self.post_message(RowFetched(row, page))

    @work(thread=True, exit_on_error=False, group="fleet")
    def _read_prometheus(self, url: str) -> None:
        answer = read(url, timeout_s=self._timeout_s, clock=self._clock, client=self._http)
        self.post_message(PrometheusRead(answer))

    def on_row_fetched(self, message: RowFetched) -> None:
        self._in_flight.discard(message.row.name)
        self._took(message.row, message.page)
        self._tell([message.row])
        if not self._in_flight:
            # Once a round is all back: one layout of the table a second, not one a box (a
            # box still waiting has its row shown at the next tick).
            self._show()

    def on_prometheus_read(self, message: PrometheusRead) -> None:
        answer = message.answer
        self._in_flight.discard(self._sources.prometheus or "")
        self._prometheus_problem = answer.error
        for row, page in answer.rows:
            self._took(row, page)
        self._tell([row for row, _ in answer.rows])
        self._show()

    def _took(self, row: BoxRow, page: Page | None) -> None:
        """The box's row and page recorded (a box named for the first time, last in the
        table's order); `_show` draws them."""
        if row.name not in self._names:
            self._names.append(row.name)
        self._rows[row.name] = row
        self._pages[row.name] = page
        self.fetches += 1

    def _tell(self, rows: list[BoxRow]) -> None:
        """A collapse newly open on a box, told through the local notifications once."""
        self._told, news = collapse_news(self._told, rows)
        if self._notifier is not None:
            for one in news:
                self._notifier.send(one)  # never blocks: each sender has its own thread

    def on_unmount(self) -> None:
        if self._notifier is not None:
            self._notifier.close()
        self._http.close()  # a fetch still waiting ends with an error no one reads

    # --- showing ------------------------------------------------------------------------------
    def rows(self) -> list[BoxRow]:
        """The rows as shown now (aged: a box whose answer is late reads so)."""
        now = self._clock()
        return [aged(self._rows[name], now) for name in self._names]

    def page(self, name: str) -> Page | None:
        """The box's page as its row now reads: none once the row is not UP (aged)."""
        row = next((one for one in self.rows() if one.name == name), None)
        if row is None or row.status is not Status.UP:
            return None
        return self._pages.get(name)

    def _cursor_box(self) -> str | None:
        table = self.query_one(DataTable)
        if not self._names or table.cursor_row < 0:
            return None
        return self._names[min(table.cursor_row, len(self._names) - 1)]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a row (the table takes Enter itself): that box's panels."""
        if event.row_key.value is not None:
            self.push_screen(BoxScreen(event.row_key.value))

    def action_steps(self) -> None:
        name = self._cursor_box()
        if name is not None:
            self.push_screen(StepsScreen(name))

    def _show(self) -> None:
        try:
            self._draw()
        except NoMatches:
            # The app is closing: a late answer has nowhere to go, and its widgets go one by
            # one (a busy run saw the table still there and the banner gone).
            return

    def _draw(self) -> None:
        table = self.query_one(DataTable)
        rows = self.rows()
        for row in rows:
            styled = self._styled(row)
            before = self._shown.get(row.name)
            if before is None:
                table.add_row(*styled, key=row.name)  # a box new to the table, in its order
            else:
                # Only the cells that read differently: each update lays the table out again.
                for index, (column, cell) in enumerate(zip(table.columns, styled, strict=True)):
                    if not _same(before[index], cell):
                        table.update_cell(row.name, column, cell, update_width=True)
            self._shown[row.name] = styled
        self._show_source()
        banner = self.query_one("#banner", Static)
        collapsed = collapses(rows)
        words = (
            "collapse on " + ", ".join(collapsed) + ": the desktop squeezes vLLM's memory"
            if collapsed
            else ""
        )
        if words != self._banner:
            self._banner = words
            banner.set_class(bool(collapsed), "shown")
            banner.update(words)
        self._show_down(rows)

    def _show_source(self) -> None:
        """Through Prometheus: the line that says so (and why it gives nothing, if so)."""
        url = self._sources.prometheus
        if url is None:
            return
        from vramtop.core.secrets import mask_url

        words = f"through Prometheus at {mask_url(url)}"
        if self._sources.said:
            words += " (the exporters named beside it are not read)"
        if self._prometheus_problem:
            words += f" · {self._prometheus_problem}"
        if words != self._source:
            self._source = words
            line = self.query_one("#source", Static)
            line.set_class(True, "shown")
            line.update(words)

    def _show_down(self, rows: list[BoxRow]) -> None:
        """Each box without figures, its reason whole on a line of its own above the table:
        the table's note column is cut at 120 columns and off-screen at 80."""
        down = "\n".join(
            f"{row.name} {down_words(row)}" for row in rows if row.status is not Status.UP
        )
        if down != self._down:
            self._down = down
            line = self.query_one("#down", Static)
            line.set_class(bool(down), "shown")
            line.update(Text(down))

    def _styled(self, row: BoxRow) -> list[Text]:
        texts = [Text(cell) for cell in cells(row)]
        if row.status is not Status.UP:
            texts[1].stylize("bold red" if row.status is Status.UNREACHABLE else "yellow")
        elif row.collapse:
            findings = COLUMNS.index("findings")
            texts[findings].stylize("bold red")
            texts[0].stylize("bold red")
        return texts


def _same(one: Text, other: Text) -> bool:
    return one.plain == other.plain and one.spans == other.spans
