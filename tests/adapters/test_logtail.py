"""LogTail on real files: growth, partial lines, truncation, rotation, absence, caps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vramtop.sources.logtail import LogTail, read_section


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


def test_a_log_opened_late_is_read_from_the_first_whole_line_of_its_end(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _append(log, "".join(f"line {n:04d}\n" for n in range(1000)))  # 10 bytes a line
    with LogTail(log) as tail:
        resume = tail.skip_to_tail(95)
        assert resume == 10_000 - 90  # the next line's start, not the middle of one
        assert tail.read_new() == [f"line {n:04d}" for n in range(991, 1000)]
        _append(log, "after\n")
        assert tail.read_new() == ["after"]


def test_a_short_log_opened_late_is_read_whole(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _append(log, "one\ntwo\n")
    with LogTail(log) as tail:
        assert tail.skip_to_tail(8) == 0
        assert tail.read_new() == ["one", "two"]
    with LogTail(tmp_path / "absent.log") as tail:
        assert tail.skip_to_tail(8) == 0 and tail.read_new() == []


def test_a_section_is_whole_lines_between_two_offsets(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _append(log, "zero\none\ntwo\nthree\n")
    assert read_section(log, 5, 13, 100) == ["one", "two"]
    assert read_section(log, 5, 19, 6) == ["one"]  # cut by the limit: whole lines only
    assert read_section(log, 13, 5, 100) == []
    assert read_section(tmp_path / "absent.log", 0, 10, 100) == []
