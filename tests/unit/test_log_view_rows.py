"""What a log view keeps, without Textual: the lines read so far and what a read adds
(kept_lines.py), and the rows they fold into, their cap and which rows are due to be drawn
again (kept_rows.py). The widgets (ServerLog, TailLog) only draw what these say."""

from __future__ import annotations

import subprocess
import sys

from vramtop.tui.widgets.kept_lines import KeptLines, continuation
from vramtop.tui.widgets.kept_rows import COUNT_REDRAW_S, KeptRows

ACCESS = 'INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def test_neither_part_imports_textual() -> None:
    code = (
        "import sys\n"
        "import vramtop.tui.widgets.kept_lines, vramtop.tui.widgets.kept_rows\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] == 'textual'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_read_that_continues_the_lines_adds_only_its_new_ones() -> None:
    kept = KeptLines(keep=5)
    assert kept.follow(["a", "b"]) is None  # the first lines: the rows are built from them
    assert kept.follow(["a", "b", "c"]) == ["c"]  # the tail grew
    assert kept.follow(["b", "c", "d", "e"]) == ["d", "e"]  # a tail that moved on
    assert kept.follow(["c", "d", "e"]) == []  # nothing new
    assert kept.follow(["d", "e", "f", "g", "h"]) == ["f", "g", "h"]
    assert kept.lines == ["d", "e", "f", "g", "h"]  # no more than the backend keeps


def test_a_read_that_does_not_continue_them_replaces_them() -> None:
    kept = KeptLines(keep=10)
    kept.follow(["one", "two"])
    assert kept.follow(["rotated", "log"]) is None
    assert kept.lines == ["rotated", "log"]


def test_a_line_written_many_times_over_is_never_counted_twice() -> None:
    assert continuation(["x", "x", "x"], ["x", "x", "x", "y"]) == ["y"]
    assert continuation(["a", "x", "x"], ["x", "x", "x", "y"]) == ["x", "y"]
    assert continuation(["a"], ["b"]) is None


def test_every_line_kept_is_taken_only_when_it_was_asked_for() -> None:
    kept = KeptLines(keep=10)
    kept.follow(["tail"])
    kept.offer(["all", "of", "it", "tail"], kept=True)
    assert kept.lines == ["tail"] and not kept.rebuild_due  # not asked for
    kept.kept_wanted = True
    kept.offer(["all", "of", "it", "tail"], kept=True)
    assert kept.lines == ["all", "of", "it", "tail"] and kept.rebuild_due
    assert not kept.kept_wanted


def test_a_search_lets_through_the_lines_holding_it_in_any_case() -> None:
    kept = KeptLines(keep=10)
    lines = ["INFO POST /v1", "INFO GET /metrics", "ERROR post failed"]
    assert kept.shown(lines) == lines
    kept.query = "post"
    assert kept.shown(lines) == ["INFO POST /v1", "ERROR post failed"]


def test_rows_past_the_cap_are_dropped_a_fifth_more_at_a_time() -> None:
    rows = KeptRows(max_rows=10)
    assert rows.add([f"INFO line {word}" for word in "abcdefghij"], now=None)
    assert len(rows) == 10 and rows.dropped == 0
    assert rows.add(["INFO line k"], now=None)
    assert len(rows) == 11 - 3 and rows.dropped == 3  # one over, and a fifth of 10
    assert rows.texts[0] == "INFO line d"


def test_a_row_is_as_wide_as_its_line_and_its_count() -> None:
    rows = KeptRows(max_rows=10)
    rows.add([ACCESS.format(port=40000 + i) for i in range(12)], now=None)
    assert rows.rows == [(ACCESS.format(port=40011), 12)]
    assert rows.width == len(ACCESS.format(port=40011)) + len("  ×12")
    assert rows.shown_text() == ACCESS.format(port=40011) + "  ×12"


def test_control_characters_are_never_kept() -> None:
    rows = KeptRows(max_rows=10)
    rows.add(["INFO \x1b[2Jcleared\r"], now=None)
    assert rows.texts == ["INFO \ufffd[2Jcleared\ufffd"]


def test_a_count_is_due_again_at_most_every_few_seconds_a_failure_at_once() -> None:
    rows = KeptRows(max_rows=10)
    assert rows.add(["INFO start", ACCESS.format(port=1)], now=0.0)
    assert rows.due(0.0) == set()  # new rows: every row is drawn anyway
    rows.add([ACCESS.format(port=2)], now=1.0)
    assert rows.due(1.0) == {1}  # the first count after a quiet spell
    rows.add([ACCESS.format(port=3)], now=2.0)
    assert rows.due(2.0) == set()  # held back
    assert rows.due(1.0 + COUNT_REDRAW_S) == {1}  # then drawn, with no new line
    rows.add(["ERROR boom", "ERROR boom"], now=5.0)
    rows.add(["ERROR boom"], now=5.5)
    assert rows.due(5.5) == {2}  # a failure's count at once
    rows.add([ACCESS.format(port=4)], now=6.0)
    assert rows.due(6.0) == set()  # (the access row is above the failure: a new one)


def test_without_a_clock_every_change_is_due_at_once() -> None:
    rows = KeptRows(max_rows=10)
    rows.add(["INFO start", ACCESS.format(port=1)], now=None)
    rows.add([ACCESS.format(port=2)], now=None)
    assert rows.due(None) == {1}
    rows.add([ACCESS.format(port=3)], now=None)
    assert rows.due(None) == {1}


def test_a_clock_that_went_back_draws_the_counts_held() -> None:
    rows = KeptRows(max_rows=10)
    rows.add(["INFO start", ACCESS.format(port=1)], now=10.0)
    rows.add([ACCESS.format(port=2)], now=10.0)
    assert rows.due(10.0) == {1}
    rows.add([ACCESS.format(port=3)], now=11.0)
    assert rows.due(5.0) == {1}
