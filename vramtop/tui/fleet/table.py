"""The fleet's table: Textual's DataTable, whose cells are drawn again once their columns have
been measured.

The table measures a column for a cell updated with `update_width=True` when it is next idle,
but it caches the cells it draws under a count of updates that this measure does not move. A
row drawn between the update and the measure (an answer that came while the screen was being
painted, more often on a busy machine) stayed cut to the column's old width, "asking…", until
the box's next change. Here the measure drops the drawn cells as a style change does."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey


class FleetTable(DataTable[Text]):
    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        super()._update_dimensions(new_rows)
        self.notify_style_update()  # drops the drawn cells, rows and lines, and repaints
