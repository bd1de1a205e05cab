"""LogTail on real files: growth, partial lines, truncation, rotation, absence, caps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vramtop.sources.logtail import LogTail, last_lines, read_section


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))


def _append(path: Path, text: str) -> None:
    with open(path, "ab") as f:
        f.write(text.encode())


def test_missing_file_then_created(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with LogTail(log) as tail:
        assert tail.read_new() == [] and tail.error is None
        _append(log, "one\ntwo\n")
        assert tail.read_new() == ["one", "two"]
        assert tail.read_new() == []


def test_partial_line_waits_for_its_end(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _append(log, "first\nsec")
    with LogTail(log) as tail:
        assert tail.read_new() == ["first"]
        _append(log, "ond\r\nthi")
        assert tail.read_new() == ["second"]
        _append(log, "rd\n")
        assert tail.read_new() == ["third"]


def test_truncation_reads_from_the_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _append(log, "old line one\nold line two\n")
    with LogTail(log) as tail:
        assert len(tail.read_new()) == 2
        log.write_text("new\n")  # truncate and rewrite, as `>` does
        assert tail.read_new() == ["new"]


def test_rotation_finishes_the_old_file_then_reads_the_new(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _append(log, "a\n")
    with LogTail(log) as tail:
        assert tail.read_new() == ["a"]
        _append(log, "b\nunfinished")
        os.rename(log, tmp_path / "server.log.1")
        _append(log, "c\n")
        assert tail.read_new() == ["b", "unfinished", "c"]
        _append(log, "d\n")
        assert tail.read_new() == ["d"]


def test_deleted_file_is_not_an_error(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _append(log, "a\n")
    with LogTail(log) as tail:
        tail.read_new()
        log.unlink()
        assert tail.read_new() == [] and tail.error is None
        _append(log, "again\n")
        assert tail.read_new() == ["again"]


def test_a_big_backlog_arrives_in_capped_reads(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _append(log, "".join(f"line {i:04d}\n" for i in range(1000)))  # 10 bytes each
    with LogTail(log, max_bytes=1000) as tail:
        first = tail.read_new()
        assert len(first) == 100
        everything = first
        while batch := tail.read_new():
            everything += batch
    assert everything == [f"line {i:04d}" for i in range(1000)]


def test_an_endless_line_is_handed_over_not_hoarded(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _append(log, "x" * 5000)
    with LogTail(log, max_bytes=1000) as tail:
        lines: list[str] = []
        for _ in range(10):
            lines += tail.read_new()
        assert all(len(line) <= 2000 for line in lines)
        assert len("".join(lines)) >= 5000 - 2000  # at most about the cap is held back
        _append(log, "\n")
        lines += tail.read_new()
    assert "".join(lines) == "x" * 5000


def test_invalid_utf8_is_replaced(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"ok \xff\xfe bytes\n")
    with LogTail(log) as tail:
        assert tail.read_new() == ["ok \ufffd\ufffd bytes"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of permissions")
def test_unreadable_file_sets_error(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _append(log, "secret\n")
    log.chmod(0)
    tail = LogTail(log)
    assert tail.read_new() == []
    assert tail.error is not None and "server.log" in tail.error
    log.chmod(0o600)
    assert tail.read_new() == ["secret"] and tail.error is None
    tail.close()


def test_a_directory_sets_error(tmp_path: Path) -> None:
    tail = LogTail(tmp_path)
    assert tail.read_new() == []
    assert tail.error is not None


def test_a_log_opened_late_is_read_from_its_end(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _append(log, "".join(f"line {n:04d}\n" for n in range(1000)) + "being writ")
    with LogTail(log) as tail:
        assert tail.skip_to_end(95) == 10_000  # after the last whole line
        _append(log, "ten\nafter\n")
        assert tail.read_new() == ["being written", "after"]


def test_a_short_log_opened_late_is_read_whole(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _append(log, "one\ntwo\n")
    with LogTail(log) as tail:
        assert tail.skip_to_end(8) == 0
        assert tail.read_new() == ["one", "two"]
    with LogTail(tmp_path / "absent.log") as tail:
        assert tail.skip_to_end(8) == 0 and tail.read_new() == []


def test_the_last_lines_are_read_back_to_enough_that_count(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    lines = [f"{'poll' if n % 10 else 'said'} {n:06d} " + "x" * (n % 50) for n in range(40_000)]
    _append(log, "".join(line + "\n" for line in lines))
    end = log.stat().st_size

    def said(line: str) -> bool:
        return line.startswith("said")

    # Read back over several blocks, lines cut by a block's edge made whole again.
    got, reached = last_lines(log, end, 300, said, 1 << 30)
    assert got == lines[-len(got) :] and sum(map(said, got)) == 300 and said(got[0])
    assert 0 < reached < end
    # Stopped by the limit: whole lines only, from the offset it gives.
    got, reached = last_lines(log, end, 10**6, said, 200_000)
    assert got == lines[-len(got) :] and end - reached <= 200_000
    assert log.read_bytes()[reached:].decode().splitlines() == got
    # Stopped at an offset (a run's start), or at the file's start.
    stop = len("".join(line + "\n" for line in lines[:39_990]))
    assert last_lines(log, end, 300, said, 1 << 30, stop) == (lines[39_990:], stop)
    assert last_lines(log, end, 10**6, said, 1 << 30) == (lines, 0)
    assert last_lines(tmp_path / "absent.log", 10, 5, said, 100) == ([], 10)


def test_a_failed_read_goes_on_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "server.log"
    _append(log, "one\ntwo\nth")
    with LogTail(log) as tail:
        assert tail.read_new() == ["one", "two"]
        real_read = tail._file.read  # type: ignore[union-attr]

        def failing(size: int = -1) -> bytes:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(tail._file, "read", failing)
        _append(log, "ree\n")
        assert tail.read_new() == [] and tail.error is not None
        assert real_read is not None
        assert tail.read_new() == ["three"]  # not "one", "two" again


def test_a_section_is_whole_lines_between_two_offsets(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _append(log, "zero\none\ntwo\nthree\n")
    assert read_section(log, 5, 13, 100) == (["one", "two"], 2)
    assert read_section(log, 5, 19, 6) == (["one"], 1)  # cut by the limit: whole lines only
    assert read_section(log, 13, 5, 100) == ([], 0)
    assert read_section(tmp_path / "absent.log", 0, 10, 100) == ([], 0)
    # How many lines end by a mark: as many as a read to the mark would give.
    for mark in (5, 9, 13, 19):
        for limit in (6, 100):
            lines, before = read_section(log, 5, 19, limit, mark)
            assert lines[:before] == read_section(log, 5, mark, limit)[0]
