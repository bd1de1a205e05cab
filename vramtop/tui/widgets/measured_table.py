"""Textual's DataTable, whose cells are drawn again once their columns have been measured.

The table measures its columns when it is next idle (for rows added, and for cells updated with
`update_width=True`), but it caches the cells it draws under a count of updates that this
measure does not move. A row drawn between the change and the measure (an answer that came
while the screen was being painted, more often on a busy machine) stayed cut to its column's
old width, "asking…" in the fleet, until the table's next change. Here the measure drops the
drawn cells as a style change does. The fleet's table and the event timeline use it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.widgets import DataTable
from textual.widgets.data_table import RowKey


class MeasuredTable(DataTable[Any]):
    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        super()._update_dimensions(new_rows)
        self.notify_style_update()  # drops the drawn cells, rows and lines, and repaints
