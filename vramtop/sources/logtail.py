"""Follows a growing log file: complete new lines per call, like `tail -F`, never raising."""

from __future__ import annotations

import contextlib
import os
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

    def read_new(self) -> list[str]:
        try:
            lines = self._read_new()
        except OSError as exc:
            self.error = f"cannot read {self.path}: {exc.strerror or exc}"
            self.close()
            return []
        except Exception as exc:  # never let a log file stop the console
            self.error = f"cannot read {self.path}: {exc}"
            return []
        self.error = None
        return lines

    def skip_to_tail(self, keep_bytes: int) -> int:
        """Start at the first whole line of the file's last `keep_bytes`, when it has more:
        a log opened late (a server that has served for hours) shows its present at once,
        rather than replaying hours of output a megabyte a call. Returns the offset reading
        starts at (0: the whole file is read, as without this call)."""
        if self._file is not None:
            return 0
        try:
            file = open(self.path, "rb")  # noqa: SIM115 (kept open between calls)
            stat = os.fstat(file.fileno())
        except OSError:
            return 0  # not there yet, or unreadable: the next read says why
        self._file, self._identity, self._partial = file, (stat.st_dev, stat.st_ino), b""
        if stat.st_size <= keep_bytes:
            return 0
        try:
            file.seek(stat.st_size - keep_bytes - 1)
            file.readline()  # the rest of a line begun before: the next line is whole
            return file.tell()
        except OSError:
            self.close()
            return 0

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
        elif stat.st_size < self._file.tell():
            # Truncated in place: what is there now is new.
            self._file.seek(0)
            self._partial = b""
        budget = max(0, self.max_bytes - sum(len(line) for line in drained))
        return drained + self._take(self._file.read(budget) if budget else b"")

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
        return [part.decode("utf-8", errors="replace").rstrip("\r") for part in parts]


def read_section(path: Path, start: int, end: int, limit: int) -> list[str]:
    """The whole lines of `path` between offsets `start` and `end` (each a line's start), at
    most `limit` bytes of them. Never raises: an unreadable file gives no lines."""
    if end <= start:
        return []
    try:
        with open(path, "rb") as file:
            file.seek(start)
            data = file.read(min(limit, end - start))
    except OSError:
        return []
    if start + len(data) < end:
        data = data[: data.rfind(b"\n") + 1]  # cut by `limit` (or a shorter file): whole lines
    return [line.decode("utf-8", errors="replace").rstrip("\r") for line in data.split(b"\n")[:-1]]
