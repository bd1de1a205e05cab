"""A recorded session's damage is per line, wherever it is: a bad byte, a line without end or
of any length is one damaged line skipped, read in bounded memory."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from vramtop import cli
from vramtop.core.bounds import MAX_LINE_BYTES
from vramtop.core.model import Sample
from vramtop.session.session_reader import SessionError, SessionReader

HEADER = {"format": "vramtop-session", "version": 1, "started_at": "2026-01-01T00:00:00Z"}
GIB = 1 << 30


def _sample(t: float) -> bytes:
    gpu = {"index": 0, "total_bytes": 32 * GIB, "used_bytes": 20 * GIB}
    return json.dumps({"t": t, "gpus": [gpu], "server": None}).encode() + b"\n"


def _write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(json.dumps(HEADER).encode() + b"\n" + b"".join(lines))
    return path


@pytest.mark.parametrize("where", [0, 1, 40])
def test_a_bad_byte_anywhere_is_one_damaged_line(tmp_path: Path, where: int) -> None:
    lines = [_sample(float(t)) for t in range(60)]
    lines[where] = lines[where].replace(b'"gpus"', b'"gp\xffus"')
    reader = SessionReader(_write(tmp_path / "s.jsonl", lines))
    samples = [r for r in reader.records() if isinstance(r, Sample)]
    assert len(samples) == 59 and reader.skipped_lines == 1


def test_diagnose_reads_a_recording_with_a_bad_byte_on_its_second_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    lines = [b"\xff\xfe garbage\n", *[_sample(float(t)) for t in range(5)]]
    path = _write(tmp_path / "s.jsonl", lines)
    assert cli.main(["diagnose", str(path)]) == 0
    assert ": 1 damaged line" in capsys.readouterr().err


def test_a_line_without_end_is_skipped_in_bounded_memory(tmp_path: Path) -> None:
    huge = b'{"t": 1, "junk": "' + b"x" * (40 << 20)  # 40 MB, no newline, then good lines
    path = _write(tmp_path / "s.jsonl", [_sample(0.0), huge + b"\n", _sample(2.0), b"y" * 99])
    tracemalloc.start()
    try:
        reader = SessionReader(path)
        records = list(reader.records())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [r.t for r in records] == [0.0, 2.0] and reader.skipped_lines == 2
    assert peak < 8 * MAX_LINE_BYTES  # the 40 MB line was read whole


def test_a_header_that_is_not_utf8_or_endless_is_not_a_session(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"format": "vramtop-session\xff", "version": 1}\n')
    with pytest.raises(SessionError, match="first line is not JSON"):
        SessionReader(bad)
    with pytest.raises(SessionError, match="first line is not JSON"):
        SessionReader("/dev/zero")


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(
        st.one_of(
            st.binary(max_size=200),
            st.just(_sample(1.0)),
            st.builds(lambda t: _sample(t), st.floats(allow_nan=True, allow_infinity=True)),
            st.text(max_size=100).map(lambda s: s.encode("utf-8", "surrogatepass") + b"\n"),
        ),
        max_size=12,
    )
)
def test_any_bytes_after_the_header_are_records_or_counted_damage(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes]
) -> None:
    path = _write(tmp_path_factory.mktemp("s") / "s.jsonl", lines)
    reader = SessionReader(path)
    records = list(reader.records())
    physical = b"".join(lines).count(b"\n") + 1
    assert len(records) + reader.skipped_lines <= physical + sum(
        line.count(b"\r") for line in lines
    )
