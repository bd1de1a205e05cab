"""The rows a log view keeps: its lines folded into rows, the oldest dropped past a cap, and
which rows are due to be drawn again. No Textual here: the view (TailLog) asks and draws."""

from __future__ import annotations

import re

from rich.cells import cell_len

from vramtop.core.log_rows import FoldedRows, Row

# A folded row whose line is no failure is drawn again at most this often (seconds of the
# console's clock) while only its count and newest line change: under steady traffic its
# count moves every tick, and drawing that one row costs the console as much as the rest of
# the log (Textual repaints the panel's lines for it). A new row, a failure's count, a row
# after a quiet spell, and whatever scrolls into view are drawn at once.
COUNT_REDRAW_S = 3.0
# Control characters (a stray escape sequence, a carriage return) would move the cursor.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _printable(line: str) -> str:
    if line.isprintable():  # most lines: no tab, no control character (checked in C)
        return line
    return _CONTROL.sub("\ufffd", line.expandtabs())


def count_badge(count: int) -> str:
    """What follows a folded row's line: how many lines it stands for."""
    return f"  ×{count}" if count > 1 else ""


class KeptRows:
    """A log's rows, at most `max_rows` of them (and a fifth more), and the rows whose line
    or count changed in place since they were last drawn."""

    def __init__(self, max_rows: int) -> None:
        self._max_rows = max_rows
        self._rows = FoldedRows()
        self.dropped = 0  # rows dropped from the front: a row's place in the log moved
        self.width = 0  # the widest row's cells, its count included
        self._redraw_now: set[int] = set()  # changed in place, to be drawn at once
        self._counts_due: set[int] = set()  # only their count changed, not yet drawn again
        self._counts_drawn_at: float | None = None

    @property
    def folded(self) -> list[Row]:
        """The rows, oldest first."""
        return self._rows.rows

    @property
    def texts(self) -> list[str]:
        """The rows' lines, the newest of each folded row."""
        return [row.line for row in self._rows.rows]

    @property
    def rows(self) -> list[tuple[str, int]]:
        """Each row's line and how many lines it stands for."""
        return [(row.line, row.count) for row in self._rows.rows]

    def shown_text(self) -> str:
        """The rows as they show: each folded row's newest line and its count."""
        return "\n".join(row.line + count_badge(row.count) for row in self._rows.rows)

    def add(self, lines: list[str], now: float | None) -> bool:
        """Add lines; whether they added rows (every row on screen is then drawn again), else
        the rows they changed in place are due (`due`).

        `now` (the console's clock) holds back a folded row's new count until COUNT_REDRAW_S
        have passed since counts were last drawn; without it, every change is due at once."""
        rows = self._rows
        before = len(rows.rows)
        touched = {rows.add(line) for line in map(_printable, lines)}
        for index in touched:  # once a row, however many lines folded into it
            row = rows.rows[index]
            self.width = max(self.width, cell_len(row.line) + len(count_badge(row.count)))
        grown = len(rows.rows) > before
        excess = len(rows.rows) - self._max_rows
        if excess > 0:
            # A fifth more than asked: a row's index (its place in the selection's text, in
            # its drawn strip's offsets) then stays the same for the next many rows, rather
            # than moving with every new row, and the strips drawn for it are kept.
            excess += self._max_rows // 5
            rows.drop_oldest(excess)
            self.dropped += excess
        if grown:
            self._counts_due.clear()  # every row on screen is drawn again
            return True
        for index in touched:
            if now is None or rows.rows[index].failure:
                self._redraw_now.add(index)
            else:
                self._counts_due.add(index)
        return False

    def due(self, now: float | None) -> set[int]:
        """The rows to draw again now: those changed in place, and those whose count changed
        unless counts were drawn less than COUNT_REDRAW_S ago (a clock that went back draws
        them)."""
        due, self._redraw_now = self._redraw_now, set()
        counts, drawn_at = self._counts_due, self._counts_drawn_at
        if not counts:
            return due
        if now is not None and drawn_at is not None and 0 <= now - drawn_at < COUNT_REDRAW_S:
            return due
        self._counts_drawn_at = now
        self._counts_due = set()
        return due | counts

    def clear(self) -> None:
        self._rows.clear()
        self._redraw_now.clear()
        self._counts_due.clear()
        self.dropped = self.width = 0

    def __len__(self) -> int:
        return len(self._rows.rows)
