"""Another process acting on a profile, as far as the action lock goes: a real second
process holding the profile's action lock as `vramtop restart` does while it restarts, until
the test lets it go."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

_CODE = """
import sys
from vramtop.config import Profile
from vramtop.supervisor.handle import ServerHandle
from vramtop.supervisor.under_way import acting
profile = Profile(name=sys.argv[1], argv=["vllm", "serve", "m"], port=1)
with acting(ServerHandle(profile), sys.argv[2], "command"):
    print("acting", flush=True)
    sys.stdin.read()
"""


@contextmanager
def acting_elsewhere(
    profile: str, action: str = "restart", env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """A process holding `profile`'s action lock for `action` while the body runs; it exits
    (0, checked) once the body is done."""
    other = subprocess.Popen(
        [sys.executable, "-c", _CODE, profile, action],
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
