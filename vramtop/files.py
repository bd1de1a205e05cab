"""How vramtop creates and opens its own files: never through a link, readable only by you,
read only where no one else could have written them.

A link planted where vramtop writes (its log, the server's log, a state file, a recording)
would otherwise have it append to, truncate or chmod whatever the link points at. Every file
is opened with `O_NOFOLLOW` (a link is refused with a message, never followed), created 0600,
and replaced atomically through a temporary file created with `O_EXCL`. Directories are
created 0700. What vramtop reads a command, a key, a pid or a setting from is judged as sshd
judges a key file (`owner_problem`, `read_checked`): yours or root's, writable by no one else,
and so is every directory from vramtop's own down to it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from vramtop.core.shell_words import shell_word

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeFile(OSError):
    """A path vramtop will not write through (a link, not a regular file); the message says
    which and what to do."""


def open_private(path: Path, flags: int) -> int:
    """`os.open` for one of vramtop's files: no link followed, created 0600, an existing
    file's looser mode tightened to 0600 (through the descriptor, never a path), another
    user's refused (`NotYours`)."""
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
        if info.st_uid not in (os.getuid(), 0):  # planted by another user: not written to
            raise NotYours(errno.EPERM, str(owner_problem(path, info)))
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
    through a link), then a rename, which replaces a link itself rather than its target.

    A write that fails (a full disk, a quota, a read-only file system) leaves `path` as it
    was and raises `OSError` naming `path` (a failed write names no file of its own)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = create_new(tmp)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except UnsafeFile:
        raise
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


class UnusableDir(OSError):
    """A directory vramtop needs that is not one (a file in its place) or cannot be made (a
    read-only file system, no permission); the message says which and what to do."""


def private_dir(path: Path) -> Path:
    """`path` as a directory, every level vramtop creates 0700 (`mkdir -p` would make the
    levels above the last one 0755). `UnusableDir` when a level is not a directory or cannot
    be made."""
    if path.is_dir():
        return path
    missing: list[Path] = []
    level = path
    while not level.exists() and level != level.parent:
        missing.append(level)
        level = level.parent
    if not level.is_dir():
        raise UnusableDir(
            errno.ENOTDIR,
            f"{level} is not a directory, and vramtop keeps its files under it: move it away "
            "(or set VRAMTOP_HOME to a directory of your own)",
            str(level),
        )
    for level in reversed(missing):
        try:
            level.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:  # made meanwhile by another vramtop
            continue
        except OSError as exc:
            raise UnusableDir(exc.errno, dir_problem_words(level, exc), str(level)) from None
    return path


def problem_words(exc: OSError) -> str | None:
    """`exc` in words with the fix, where it names a file or directory of vramtop's (a full
    disk, a read-only file system, a link, another user's file); None where it names none."""
    if isinstance(exc, UnusableDir | UnsafeFile):
        return str(exc.strerror or exc)
    if exc.filename is None:
        return None
    return dir_problem_words(Path(os.fsdecode(exc.filename)), exc)


def dir_problem_words(path: Path, exc: OSError) -> str:
    """Why `path` (vramtop's own file or directory) cannot be written, and the fix."""
    reason = exc.strerror or str(exc)
    if exc.errno == errno.EROFS:
        fix = "its file system is read-only: remount it writable, or set VRAMTOP_HOME to a"
        fix += " writable directory of your own"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        fix = "you may not write there: fix its owner or mode, or set VRAMTOP_HOME to a"
        fix += " directory of your own"
    elif exc.errno == errno.ENOSPC:
        fix = "its disk is full: free some space"
    elif exc.errno == errno.ENAMETOOLONG:
        fix = "the name is too long for the file system: choose a shorter name"
    elif exc.errno == errno.ENOTDIR:
        fix = "a file stands where a directory should: move it away"
    elif exc.errno == errno.EISDIR:
        fix = "a directory stands where vramtop keeps a file: move it away"
    else:
        fix = "check the path, or set VRAMTOP_HOME to a directory of your own"
    return f"cannot write {path}: {reason}; {fix}"


def open_problem(path: Path) -> str | None:
    """Why a directory vramtop keeps its files in is unsafe to use, or None.

    Not a directory, or failing `owner_problem`: others could plant links or files there;
    a symbolic link is judged by the directory it leads to."""
    try:
        info = path.lstat()
    except OSError:
        return None  # not there yet: vramtop creates it 0700
    if stat.S_ISLNK(info.st_mode):
        # A link to a directory elsewhere: what counts is its target, every link followed.
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):  # a dangling link, or a loop of links
            return f"{path} is a symbolic link to nothing usable; remove it and try again"
        problem = open_problem(target)
        return f"{path} is a link to {target}, and {problem}" if problem else None
    if not stat.S_ISDIR(info.st_mode):
        return (
            f"{path} is not a directory, and vramtop keeps its files there: move it away "
            "(or set VRAMTOP_HOME to a directory of your own)"
        )
    return owner_problem(path, info)


def owner_problem(path: Path, info: os.stat_result) -> str | None:
    """Why vramtop must not use `path` (a file or directory it reads from, `info` its stat),
    or None: the one rule for vramtop's files, as sshd's StrictModes has it.

    It must belong to you (or root) and be writable by no one else: a profile is a command
    vramtop runs, a state file names the pid it signals, a token opens the door. A directory
    with the sticky bit (/tmp) may be writable by all: no one can replace what is yours in
    it."""
    me = os.getuid()
    word = shell_word(str(path))  # as the fix is copied into a shell
    if info.st_uid not in (me, 0):
        return (
            f"{path} belongs to another user (uid {info.st_uid}), who could change what "
            f"vramtop reads from it: run `chown {_user_name(me)} {word}` (or remove it) and "
            "try again"
        )
    mode = stat.S_IMODE(info.st_mode)
    if not mode & 0o022 or (stat.S_ISDIR(info.st_mode) and mode & stat.S_ISVTX):
        return None
    who = "every user" if mode & 0o002 else "its group"
    return (
        f"{path} is writable by {who} (mode {mode:o}), who could change what vramtop reads "
        f"from it: run `chmod go-w {word}` and try again"
    )


def _user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class NotYours(UnsafeFile):
    """A file vramtop will not use: it, or a directory above it, belongs to another user or
    can be written by one (`owner_problem`); the message names the path and the fix."""


def read_checked(
    path: Path, *, root: Path | None, limit: int | None = None, follow: bool = False
) -> bytes:
    """The bytes of `path`, one of vramtop's files, read only when it passes `owner_problem`
    and so does every directory from the one holding it up to `root` (vramtop's directory
    it lies in; all the way to / when a link leads out of it; None: a file named by the
    person, judged alone), the way sshd walks up from a key file.

    A link is refused (`UnsafeFile` names it, where a reader may write the file anew) unless
    `follow` (a file the person writes, such as a profile kept with their dotfiles): then its
    target is judged, and its directories. `NotYours` says which file or directory another
    user owns or can write, and the fix.

    The file is judged through its open descriptor (no window in which it could be swapped);
    `FileNotFoundError` as `open`'s. `limit`: read no more than that many bytes."""
    given = path
    if follow and path.is_symlink():
        try:
            path = path.resolve(strict=True)
        except RuntimeError:  # a loop of links
            raise UnsafeFile(
                errno.ELOOP, f"{path} is a loop of symbolic links; remove it"
            ) from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            shown = shell_word(str(path))
            raise UnsafeFile(
                exc.errno,
                f"{path} is a symbolic link, and vramtop neither reads nor writes its own "
                "files through links: replace it with the file it points to (`cp "
                f'--remove-destination "$(readlink -f {shown})" {shown}`) or remove it',
            ) from None
        raise
    # Judged before it is wrapped: a directory's descriptor would fail as "Is a directory: 4".
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnsafeFile(errno.EINVAL, f"{path} is not a regular file; remove it")
    with os.fdopen(fd, "rb") as handle:
        problem = owner_problem(path, info)
        if problem is None and (root is not None or path != given):
            problem = dirs_problem(path.parent, root)
        if problem is not None:
            raise NotYours(errno.EPERM, problem)
        return handle.read() if limit is None else handle.read(limit)


def dirs_problem(folder: Path, root: Path | None) -> str | None:
    """The first directory from `folder` up to `root` (or /) that fails `owner_problem`
    (levels not made yet are passed over: vramtop makes them 0700)."""
    try:
        level = folder.resolve()
        top = root.resolve() if root is not None else None
    except (OSError, RuntimeError) as exc:  # a loop of links
        return f"{folder} cannot be used: {exc}"
    if top is not None and not level.is_relative_to(top):
        top = None  # reached through a link out of vramtop's directories: judged up to /
    while True:
        try:
            info = level.stat()
        except FileNotFoundError:  # not made yet: vramtop makes it 0700
            info = None
        problem = None if info is None else owner_problem(level, info)
        if problem is not None:
            return problem
        if level == top or level == level.parent:
            return None
        level = level.parent
