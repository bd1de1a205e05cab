"""Follows a growing log file: complete new lines per call, like `tail -F`, never raising."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

MAX_READ_BYTES = 1 << 20


class LogTail:
    """Returns the complete lines appended to `path` since the last call.

    The file may not exist yet (the server has not started), may be truncated (restarted
    with `>`), or replaced (rotated): a new file is read from its start. At most
    `max_bytes` are read per call, so a huge backlog arrives over several calls instead of
    at once. A failure leaves `error` set and returns no lines; the next call tries again.
    """

    def __init__(self, path: Path, max_bytes: int = MAX_READ_BYTES) -> None:
        self.path = Path(path)
        self.max_bytes = max(1, max_bytes)
        self.error: str | None = None
        self._file: BinaryIO | None = None
        self._identity: tuple[int, int] | None = None  # (device, inode) of the open file
        self._partial = b""  # the last line, not yet ended by a newline
        # Where reading stopped in the file (device, inode) last read: a read that failed
        # (the file closed) goes on from there, not from the file's start.
        self._position = 0
        self._resume: tuple[tuple[int, int], int] | None = None

    def read_new(self) -> list[str]:
        try:
            lines = self._read_new()
        except OSError as exc:
            self.error = f"cannot read {self.path}: {exc.strerror or exc}"
            if self._identity is not None:  # (from the start of a line not ended yet)
                self._resume = (self._identity, self._position - len(self._partial))
            self.close()
            return []
        except Exception as exc:  # never let a log file stop the console
            self.error = f"cannot read {self.path}: {exc}"
            return []
        self.error = None
        return lines

    def skip_to_end(self, longer_than: int) -> int:
        """When the file is longer than `longer_than`, start reading after its last whole
        line: a log opened late (a server that has served for hours) is read from its present
        on, rather than replayed from its start a megabyte a call (`last_lines` reads what
        came just before). Returns that offset (0: the whole file is read, as without this
        call)."""
        if self._file is not None:
            return 0
        try:
            file = open(self.path, "rb")  # noqa: SIM115 (kept open between calls)
            stat = os.fstat(file.fileno())
        except OSError:
            return 0  # not there yet, or unreadable: the next read says why
        self._file, self._identity, self._partial = file, (stat.st_dev, stat.st_ino), b""
        if stat.st_size <= longer_than:
            return 0
        try:
            back = min(stat.st_size, self.max_bytes)
            file.seek(stat.st_size - back)
            # After the last newline: a line still being written is read once it ends.
            end = stat.st_size - back + file.read(back).rfind(b"\n") + 1
            file.seek(end)
        except OSError:
            self.close()
            return 0
        self._position = end
        return end

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
        self._file, self._identity, self._partial = None, None, b""

    def __enter__(self) -> LogTail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read_new(self) -> list[str]:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            # Not there yet, or between rotation steps: nothing new, and not an error.
            return []
        identity = (stat.st_dev, stat.st_ino)
        drained: list[str] = []
        if self._file is not None and identity != self._identity:
            # Rotated: finish the old file's last lines, then start the new one from 0.
            drained = self._take(self._file.read(self.max_bytes), final=True)
            self.close()
        if self._file is None:
            self._file = open(self.path, "rb")  # noqa: SIM115 (kept open between calls)
            self._identity = identity
            self._partial = b""
            resume, self._resume = self._resume, None
            if resume is not None and resume[0] == identity and resume[1] <= stat.st_size:
                self._file.seek(resume[1])  # the same file as before the failed read
        elif stat.st_size < self._file.tell():
            # Truncated in place: what is there now is new.
            self._file.seek(0)
            self._partial = b""
        budget = max(0, self.max_bytes - sum(len(line) for line in drained))
        data = self._file.read(budget) if budget else b""
        self._position = self._file.tell()
        return drained + self._take(data)

    def _take(self, data: bytes, final: bool = False) -> list[str]:
        chunk = self._partial + data
        parts = chunk.split(b"\n")
        self._partial = parts.pop()
        if final and self._partial:
            parts.append(self._partial)
            self._partial = b""
        elif len(self._partial) > self.max_bytes:
            # A line with no end in sight (a progress bar without newlines): hand it over
            # rather than hold it without bound.
            parts.append(self._partial)
            self._partial = b""
        return _decoded(parts)


def _decoded(parts: list[bytes]) -> list[str]:
    """Lines as text: undecodable bytes replaced, a CRLF's carriage return dropped."""
    return [part.decode("utf-8", errors="replace").rstrip("\r") for part in parts]


def read_section(
    path: Path, start: int, end: int, limit: int, mark: int | None = None
) -> tuple[list[str], int]:
    """The whole lines of `path` between offsets `start` and `end` (each a line's start), at
    most `limit` bytes of them; and how many of them end by offset `mark` (a line's start;
    None: `end`), as reading from `start` to `mark` would give. Never raises: an unreadable
    file gives no lines."""
    if end <= start:
        return [], 0
    try:
        with open(path, "rb") as file:
            file.seek(start)
            data = file.read(min(limit, end - start))
    except OSError:
        return [], 0
    if start + len(data) < end:
        data = data[: data.rfind(b"\n") + 1]  # cut by `limit` (or a shorter file): whole lines
    lines = _decoded(data.split(b"\n")[:-1])
    before = len(lines) if mark is None else data.count(b"\n", 0, max(0, mark - start))
    return lines, before


# How much `last_lines` reads at a time, going back.
_BLOCK = 128 * 1024


def last_lines(
    path: Path, end: int, count: int, counts: Callable[[str], bool], limit: int, stop: int = 0
) -> tuple[list[str], int]:
    """The lines of `path` before offset `end` (a line's start), read back from there until
    `count` of them are lines that `counts` (e.g. not a client's polling), or `limit` bytes
    back, or offset `stop` (a line's start); and the offset it read back to (`stop` when it got
    there). Never raises: an unreadable file gives what was read."""
    blocks: list[list[str]] = []
    found = 0
    position = end
    rest = b""  # the end of a line that began before the block it ended in
    try:
        with open(path, "rb") as file:
            while position > stop and found < count and end - position < limit:
                begin = max(stop, position - _BLOCK, end - limit)
                file.seek(begin)
                data = file.read(position - begin) + rest
                if begin > stop:  # the block's first line may have begun before it
                    cut = data.find(b"\n") + 1
                    rest, data = data[:cut] if cut else data, data[cut:] if cut else b""
                lines = _decoded(data.split(b"\n")[:-1])
                blocks.append(lines)
                found += sum(1 for line in lines if counts(line))
                position = begin
    except OSError:
        pass
    kept: list[str] = []
    wanted = count
    newest_first = (line for lines in blocks for line in reversed(lines))
    for line in newest_first:
        if wanted == 0:
            break
        kept.append(line)
        wanted -= counts(line)
    # (A line cut at the limit is not given: the offset is past its start, at the next one's.)
    return kept[::-1], position + len(rest) if position > stop else stop
