"""The fleet's table draws a cell at its column's new width once measured, even where the row
was drawn between the cell's update and the measure (as a busy machine's paint can fall)."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from tests.support.waiting import wait_until_async
from vramtop.tui.fleet.table import FleetTable

LONG = "collapse: the desktop took 3.2 GiB"


class _One(App[None]):
    def compose(self) -> ComposeResult:
        yield FleetTable()

    def on_mount(self) -> None:
        table = self.query_one(FleetTable)
        table.add_columns("box", "note")
        table.add_row(Text("r9700"), Text("asking…"), key="r9700")


async def test_a_row_drawn_before_its_column_was_measured_is_drawn_again_whole() -> None:
    app = _One()
    async with app.run_test(size=(80, 10)) as pilot:
        await pilot.pause()
        table = app.query_one(FleetTable)
        note = list(table.columns)[1]
        table.update_cell("r9700", note, Text(LONG), update_width=True)
        # Drawn now, before the table is idle: the column is still as wide as "asking…".
        assert LONG not in table.render_line(1).text
        await wait_until_async(
            lambda: not (table._updated_cells or table._require_update_dimensions),
            deadline_s=30,
            what="the note's column measured",
            pause=pilot.pause,
        )
        assert LONG in table.render_line(1).text
