"""Another process acting on a profile, as far as the action lock goes: a real second
process holding the profile's action lock as `vramtop restart` does while it restarts, until
the test lets it go; or holding it with the file saying what the test wrote (an older
vramtop's lock, a damaged one)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

_CODE = """
import sys
from vramtop.config import Profile
from vramtop.supervisor.handle import ServerHandle
from vramtop.supervisor.under_way import acting
profile = Profile(name=sys.argv[1], argv=["vllm", "serve", "m"], port=1)
with acting(ServerHandle(profile), sys.argv[2], sys.argv[3]):
    print("acting", flush=True)
    sys.stdin.read()
"""

# The lock held, its file saying what the test gave (written after the lock is taken, as
# `ActorLock.try_acquire` writes its own).
_HOLDING = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.pwrite(fd, sys.argv[2].encode("utf-8", "surrogateescape"), 0)
print("acting", flush=True)
sys.stdin.read()
"""


@contextmanager
def acting_elsewhere(
    profile: str,
    action: str = "restart",
    env: Mapping[str, str] | None = None,
    asked_by: str = "command",
) -> Iterator[subprocess.Popen[str]]:
    """A process holding `profile`'s action lock for `action`, asked by `asked_by`, while the
    body runs; it exits (0, checked) once the body is done."""
    with _holding([_CODE, profile, action, asked_by], env) as other:
        yield other


@contextmanager
def lock_held_elsewhere(path: Path, content: str) -> Iterator[subprocess.Popen[str]]:
    """A process holding the lock at `path`, its file saying `content`, while the body runs."""
    with _holding([_HOLDING, str(path), content], None) as other:
        yield other


@contextmanager
def _holding(argv: list[str], env: Mapping[str, str] | None) -> Iterator[subprocess.Popen[str]]:
    other = subprocess.Popen(
        [sys.executable, "-c", *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=None if env is None else dict(env),
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "acting"
        yield other
    finally:
        assert other.stdin is not None
        other.stdin.close()
        assert other.wait(30) == 0
        if other.stdout is not None:
            other.stdout.close()
