"""The console's tables (the fleet's, the event timeline's) draw a cell at its column's new
width once measured, even where its row was drawn between the change and the measure (as a
busy machine's paint can fall)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.app import App, ComposeResult

from tests.support.waiting import PROCESS_S, wait_until_async
from vramtop.tui.widgets.measured_table import MeasuredTable

LONG = "collapse: the desktop took 3.2 GiB"


class _One(App[None]):
    def compose(self) -> ComposeResult:
        yield MeasuredTable()

    def on_mount(self) -> None:
        table = self.query_one(MeasuredTable)
        table.add_columns("box", "note")
        table.add_row("r9700", "asking…", key="r9700")


def _update_the_cell(table: MeasuredTable) -> None:
    table.update_cell("r9700", list(table.columns)[1], LONG, update_width=True)


def _fill_again(table: MeasuredTable) -> None:
    table.clear()
    table.add_row("r9700", LONG, key="r9700")


@pytest.mark.parametrize("change", [_update_the_cell, _fill_again], ids=["update", "refill"])
async def test_a_row_drawn_before_its_column_was_measured_is_drawn_again_whole(
    change: Callable[[MeasuredTable], None],
) -> None:
    app = _One()
    async with app.run_test(size=(80, 10)) as pilot:
        await pilot.pause()
        table = app.query_one(MeasuredTable)
        change(table)
        # Drawn now, before the table is idle: the column is still as wide as "asking…".
        assert LONG not in table.render_line(1).text
        await wait_until_async(
            lambda: not (table._updated_cells or table._require_update_dimensions),
            deadline_s=PROCESS_S,
            what="the note's column measured",
            pause=pilot.pause,
        )
        assert LONG in table.render_line(1).text
