"""How vramtop creates and opens its own files: never through a link, readable only by you.

A link planted where vramtop writes (its log, the server's log, a state file, a recording)
would otherwise have it append to, truncate or chmod whatever the link points at. Every file
is opened with `O_NOFOLLOW` (a link is refused with a message, never followed), created 0600,
and replaced atomically through a temporary file created with `O_EXCL`. Directories are
created 0700.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeFile(OSError):
    """A path vramtop will not write through (a link, not a regular file); the message says
    which and what to do."""


def open_private(path: Path, flags: int) -> int:
    """`os.open` for one of vramtop's files: no link followed, created 0600, and an existing
    file's looser mode tightened to 0600 (through the descriptor, never a path)."""
    try:
        fd = os.open(path, flags | _NOFOLLOW, PRIVATE_FILE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFile(
                exc.errno,
                f"{path} is a symbolic link; vramtop does not write through links "
                "(remove it and try again)",
            ) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(errno.EINVAL, f"{path} is not a regular file; remove it")
        if info.st_mode & 0o077:
            os.fchmod(fd, PRIVATE_FILE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_append(path: Path) -> int:
    return open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)


def create_new(path: Path, *, replace: bool = False) -> int:
    """A new file for writing; an existing one is an error (`FileExistsError`) unless
    `replace`, which truncates it (still never through a link)."""
    extra = os.O_TRUNC if replace else os.O_EXCL
    return open_private(path, os.O_WRONLY | os.O_CREAT | extra)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` whole: a temporary file beside it (created new, never
    through a link), then a rename, which replaces a link itself rather than its target."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = create_new(tmp)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def private_dir(path: Path) -> Path:
    """`path` as a directory, every level vramtop creates 0700 (`mkdir -p` would make the
    levels above the last one 0755)."""
    if path.is_dir():
        return path
    missing: list[Path] = []
    level = path
    while not level.exists() and level != level.parent:
        missing.append(level)
        level = level.parent
    for level in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another vramtop
            level.mkdir(mode=PRIVATE_DIR)
    return path


def open_problem(path: Path) -> str | None:
    """Why a directory vramtop keeps its files in is unsafe to use, or None.

    Writable by other users (without the sticky bit), or owned by someone else: they could
    plant links or read what vramtop writes."""
    try:
        info = path.lstat()
    except OSError:
        return None  # not there yet: vramtop creates it 0700
    if stat.S_ISLNK(info.st_mode):
        return None  # a link to a directory elsewhere: its target is checked
    if info.st_uid != os.getuid():
        return f"{path} belongs to another user; vramtop keeps its files only in your own"
    if info.st_mode & 0o002 and not info.st_mode & stat.S_ISVTX:
        return (
            f"{path} is writable by every user (mode {stat.S_IMODE(info.st_mode):o}): others "
            f"could replace vramtop's files there. Run `chmod 700 {path}` and try again"
        )
    return None
