"""Folding a log's repeated lines into rows: what folds, and what never does."""

from __future__ import annotations

from unittest.mock import patch

from hypothesis import example, given
from hypothesis import strategies as st

from vramtop.core import log_rows
from vramtop.core.log_rows import FoldedRows, digits_made_one, shape

ACCESS = 'INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
SCRAPE = 'INFO:     127.0.0.1:{port} - "GET /metrics HTTP/1.1" 200 OK'


def _rows(lines: list[str]) -> list[tuple[str, int]]:
    rows = FoldedRows()
    for line in lines:
        rows.add(line)
    return [(row.line, row.count) for row in rows.rows]


def test_a_shape_masks_numbers_and_hex_ids_but_keeps_words() -> None:
    assert shape(ACCESS.format(port=40123)) == shape(ACCESS.format(port=51000))
    assert shape("Finished request chatcmpl-3f2a9b0c11d4e5f6") == shape(
        "Finished request chatcmpl-0a1b2c3d4e5f6a7b"
    )
    assert shape("id 123e4567-e89b-12d3-a456-426614174000") == shape(
        "id 9b2f0c1e-4a7d-4c3e-8f21-0d5e6a7b8c9d"
    )
    # A word made of hex letters is a word, and other words are another line.
    assert shape("decade feed") == "decade feed"
    assert shape('"POST /v1/completions" 200 OK') != shape('"POST /v1/completions" 500 Internal')


def test_repeats_fold_into_one_row_showing_the_newest_line_and_the_count() -> None:
    lines = [ACCESS.format(port=40000 + i) for i in range(143)]
    assert _rows(["INFO:     Application startup complete.", *lines]) == [
        ("INFO:     Application startup complete.", 1),
        (ACCESS.format(port=40142), 143),
    ]


def test_interleaved_kinds_fold_each_into_its_own_row_in_place() -> None:
    lines = []
    for second in range(30):
        lines += [ACCESS.format(port=40000 + 10 * second + i) for i in range(7)]
        lines.append(SCRAPE.format(port=50000 + second))
    assert _rows(lines) == [(ACCESS.format(port=40296), 210), (SCRAPE.format(port=50029), 30)]


def test_only_the_last_few_rows_take_a_repeat() -> None:
    lines = [ACCESS.format(port=1), "one", "two", "three", "four", ACCESS.format(port=2)]
    assert [count for _line, count in _rows(lines)] == [1, 1, 1, 1, 1, 1]


def test_nothing_folds_across_a_failure_and_failures_fold_only_when_consecutive() -> None:
    error = "ERROR 11-14 10:02:{s:02d} [core.py:812] request {r} failed: out of memory"
    lines = [
        ACCESS.format(port=1),
        error.format(s=1, r=7),
        ACCESS.format(port=2),  # after the error: a row of its own
        error.format(s=2, r=8),  # not moved above the request line that came between
        error.format(s=3, r=9),
        error.format(s=4, r=10),
    ]
    assert _rows(lines) == [
        (ACCESS.format(port=1), 1),
        (error.format(s=1, r=7), 1),
        (ACCESS.format(port=2), 1),
        (error.format(s=4, r=10), 3),
    ]
    # A traceback's lines differ: each keeps its row.
    traceback = [
        "Traceback (most recent call last):",
        '  File "/srv/vllm/engine.py", line 12, in step',
        "    raise EngineDeadError()",
        "EngineDeadError: the engine died",
    ]
    assert [count for _line, count in _rows(traceback)] == [1, 1, 1, 1]


# Characters a shape tells apart: ASCII digits, hex letters, other letters, the underscore,
# digits of other scripts ('٣', '０'), separators, and anything else.
_LINE_TEXT = st.text(
    st.sampled_from('0123456789abcdefABCDEFxyzXYZ_٣０ .:-/="#') | st.characters(), max_size=40
)


@given(_LINE_TEXT, st.lists(st.tuples(st.integers(0, 39), _LINE_TEXT.map(lambda t: t[:1]))))
@example("port 4 of x", [(5, "7"), (10, "y")])
def test_lines_are_looked_up_as_one_exactly_when_they_differ_only_in_ascii_digits(
    line: str, changes: list[tuple[int, str]]
) -> None:
    # A line's shape is looked up by the line with its digits made one: sound only if lines
    # looked up as one differ in nothing but digits, and lines that do share a shape.
    chars = list(line)
    for at, char in changes:
        if at < len(chars) and char:
            chars[at] = char
    other = "".join(chars)
    only_digits = all(
        a == b or (a in "0123456789" and b in "0123456789")
        for a, b in zip(line, other, strict=True)
    )
    assert (digits_made_one(other) == digits_made_one(line)) == only_digits
    if only_digits:
        assert shape(other) == shape(line)


@given(st.lists(_LINE_TEXT | st.sampled_from([ACCESS.format(port=40000), "ERROR 1 failed"])))
def test_each_row_has_the_shape_of_its_lines(lines: list[str]) -> None:
    with patch.object(log_rows, "SHAPES_KEPT", 3):  # (what is kept is forgotten often)
        rows = FoldedRows(window=2)
        for line in lines:
            index = rows.add(line)
            assert rows.rows[index].shape == shape(line)
            assert rows.rows[index].line == line
