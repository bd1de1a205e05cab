"""A log's lines as the rows a reader sees: repeated lines folded into one row with a count.

A busy vLLM writes a line per request (`INFO: 127.0.0.1:40123 - "POST /v1/chat/completions
HTTP/1.1" 200 OK`), a `GET /metrics` line per scrape and a stats line every few seconds: lines
that say the same thing with other numbers. Shown one a row, they bury the lines a person
reads the log for (warnings, errors, a traceback) within seconds. As `uniq -c` and journald's
"message repeated N times" do, such lines are folded: a line with the same *shape* as one of
the last few rows (its digits and hex ids masked) does not add a row; that row shows the
newest such line and how many lines it stands for.

The rules, in order:
- a failure line (an error, a traceback, a dying engine) folds only into the row just above
  it, when that row is the same failure again: repeated errors stay one highlighted row with
  their count, and never move above what came between them;
- any other line folds into the newest row of its shape among the last `WINDOW` rows, so
  that lines of two or three kinds interleaved (requests and scrapes) fold too; never across
  a failure row, so nothing written before a failure is counted as if written after it;
- anything else is a new row.

Only the rows shown fold: the log file, `vramtop logs` and anything else reading the log
keep every line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# What a failed start or a dying engine prints; worth a colour even in a long tail.
FAILURE = re.compile(
    r"\b(ERROR|CRITICAL|Traceback|OutOfMemoryError|out of memory|CUDA error|EngineDeadError|"
    r"exited with code)\b",
    re.IGNORECASE,
)
# How many lines' shapes, and shapes' failure verdicts, are kept (then they are worked out
# again).
SHAPES_KEPT = 256
# How many of the last rows a line may fold into: room for a few kinds of line interleaved
# (a request line, a scrape line, the stats line, the health check).
WINDOW = 4

# What varies between repeats, masked in a line's shape: an id in hex (a word of hex digits
# with a digit in it: "3f2a9b0c", each part of a UUID) or a run of digits ("pid=4242", "12ms").
# A word of hex letters alone ("decade", "feed") is a word. Possessive, never backtracking:
# a line costs a few microseconds however it reads.
_VARIABLE = re.compile(r"(?<![0-9A-Za-z])[a-fA-F]*+\d[0-9A-Fa-f]*+(?![0-9A-Za-z])|\d+")


def shape(line: str) -> str:
    """The line with what varies between repeats (numbers, hex ids) masked: lines with the
    same shape say the same thing."""
    return _VARIABLE.sub("#", line)


# Every ASCII digit made a 0, in a line's UTF-8 (where bytes 0x30-0x39 are ASCII digits and
# nothing else). A shape depends only on which characters are digits, not on which digits they
# are: lines that differ only there (a port, a count of the same width) have one shape, and
# finding out that a line is such a line takes a byte table rather than the regular expression.
_ONE_DIGIT = bytes.maketrans(b"123456789", b"000000000")


def digits_made_one(line: str) -> bytes:
    """The line with every ASCII digit the same: lines equal here have the same shape."""
    return line.encode("utf-8", "surrogatepass").translate(_ONE_DIGIT)


# FAILURE's words, to look for in C before the regular expression runs (most lines have none).
_FAILURE_WORDS = ("error", "critical", "traceback", "out of memory", "exited with code")


def is_failure(line: str) -> bool:
    """Whether a line (or a line's shape: the same words) says something failed."""
    lower = line.lower()
    return any(word in lower for word in _FAILURE_WORDS) and FAILURE.search(line) is not None


@dataclass
class Row:
    """One row: the newest line it stands for, and how many lines that is."""

    line: str
    count: int
    shape: str
    failure: bool


class FoldedRows:
    """The rows of a log, extended a line at a time.

    `add` says which row a line went to, so that a view redraws only that row when nothing
    else moved."""

    def __init__(self, window: int = WINDOW) -> None:
        self.rows: list[Row] = []
        self._window = window
        # A line's shape, by the line with its digits made one: a busy server writes the
        # same line with other numbers of the same width many times a second (a request
        # line and its client's port).
        self._shapes: dict[bytes, str] = {}
        # Whether a shape is a failure's: a shape keeps every word of its lines, so this is
        # asked once for all the lines of one kind (a busy log has a handful of kinds).
        self._failures: dict[str, bool] = {}

    def add(self, line: str) -> int:
        """Add a line; the index of the row it now shows in (the last one when it is new)."""
        key = digits_made_one(line)
        line_shape = self._shapes.get(key)
        if line_shape is None:
            if len(self._shapes) >= SHAPES_KEPT:
                self._shapes.clear()
            line_shape = self._shapes[key] = shape(line)
        failure = self._failures.get(line_shape)
        if failure is None:
            if len(self._failures) >= SHAPES_KEPT:
                self._failures.clear()
            failure = self._failures[line_shape] = is_failure(line_shape)
        index = self._fold_target(line_shape, failure)
        if index is None:
            self.rows.append(Row(line, 1, line_shape, failure))
            return len(self.rows) - 1
        row = self.rows[index]
        row.line = line
        row.count += 1
        return index

    def _fold_target(self, line_shape: str, failure: bool) -> int | None:
        rows = self.rows
        if failure:
            last = len(rows) - 1
            return last if rows and rows[last].shape == line_shape else None
        for index in range(len(rows) - 1, max(len(rows) - 1 - self._window, -1), -1):
            row = rows[index]
            if row.shape == line_shape and not row.failure:
                return index
            if row.failure:
                return None
        return None

    def drop_oldest(self, count: int) -> None:
        del self.rows[:count]

    def clear(self) -> None:
        self.rows.clear()
