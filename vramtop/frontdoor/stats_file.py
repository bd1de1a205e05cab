"""The door's `--stats-file`: written only where nothing else would be lost.

The door replaces its stats file each second. The path is the caller's: it may name a file
vramtop never wrote (as root, a system file). So the door writes only over a file that is
absent, or one it recognises as a stats file of its own (a small JSON object with its status
keys, owned by this user), never through a symbolic link, and between two writes only over
the file it wrote itself: anything else found there stops the writing, logged once.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

from vramtop import files

log = logging.getLogger(__name__)

# Every stats file any door wrote has these (`GET /vramtop/door`'s first fields).
STATS_KEYS = frozenset({"upstream", "holding", "in_flight", "held", "served", "failed", "pid"})
# A stats file is a few hundred bytes; more is not one.
MAX_STATS_BYTES = 64 * 1024


def problem(path: Path) -> str | None:
    """Why the door must not write its stats at `path`, or None."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        if not path.parent.is_dir():
            return f"--stats-file {path}: its directory {path.parent} does not exist"
        return None
    except OSError as exc:
        return f"--stats-file {path} cannot be looked at: {exc.strerror}"
    if stat.S_ISLNK(info.st_mode):
        return (
            f"--stats-file {path} is a symbolic link; the front door does not write through "
            "links: name the file itself, or a new one"
        )
    if not _is_stats_file(path, info):
        return (
            f"--stats-file {path} exists and is not a stats file the front door wrote; it "
            "would be replaced: name a new file (or remove this one if it is yours to lose)"
        )
    return None


def _is_stats_file(path: Path, info: os.stat_result) -> bool:
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_STATS_BYTES:
        return False
    if info.st_uid != os.getuid():
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        text = f.read(MAX_STATS_BYTES + 1)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.keys() >= STATS_KEYS


class StatsWriter:
    """Writes the stats at `path` (atomically, 0600), as long as what is there is its own."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stopped = False
        # The file it wrote last (an inode number alone may be reused at once by another file).
        self._written: tuple[int, int, int, int] | None = None

    def write(self, data: bytes) -> None:
        if self.stopped:
            return
        if not self._still_its_own():
            why = problem(self.path)
            if why is not None:
                log.warning("%s; the front door stopped writing its stats there", why)
                self.stopped = True
                return
        try:
            files.write_atomic(self.path, data)
            info = os.lstat(self.path)
        except OSError:
            return  # a full disk, a directory gone: the next second tries again
        self._written = _identity(info)

    def _still_its_own(self) -> bool:
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return _identity(info) == self._written


def _identity(info: os.stat_result) -> tuple[int, int, int, int]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_ctime_ns)
