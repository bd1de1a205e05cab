"""Every lock vramtop takes on a file, in one place: `flock(2)` on an open descriptor.

The kernel drops such a lock when the last descriptor on it is closed, and when the process
dies, so a crashed vramtop never leaves a lock behind; closing the descriptor is how a lock
is released. The callers open their descriptors with O_CLOEXEC, so a child (the server)
never inherits one and never holds a lock past its parent.
"""

from __future__ import annotations

import fcntl


def hold(fd: int) -> None:
    """Wait until this process holds the file of `fd` alone."""
    fcntl.flock(fd, fcntl.LOCK_EX)


def try_hold(fd: int, *, shared: bool = False) -> bool:
    """Take the lock on the file of `fd` if it is free now, without waiting: alone, or
    `shared` with others who share it. False when another process holds it (alone, or shared
    when this one asks to hold it alone)."""
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
