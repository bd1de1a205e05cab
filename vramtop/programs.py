"""Running a short-lived program (a toast's PowerShell, notify-send, an `--on-finding`
command, a profile's prelude) so that nothing it started outlives its timeout or vramtop.

Each program runs in a session of its own, so its process group is everything it started
that did not leave on purpose (a `sleep` behind a shell, PowerShell's helpers). On its
timeout the whole group gets SIGTERM, then SIGKILL for what is left after `grace_s`, and the
program is reaped: killing the program alone left its child running under pid 1. A program
still running when vramtop exits (a guard stopped while a toast hangs) is ended the same way.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

# How long a group has to go after SIGTERM before SIGKILL, and to go after SIGKILL.
GRACE_S = 2.0
KILL_WAIT_S = 2.0
# Windows' own drive as WSL mounts it: PowerShell started from a directory on the Linux file
# system takes up to ~10 s to start (~0.5 s from a Windows directory).
WINDOWS_DRIVE = Path("/mnt/c")


@dataclass(frozen=True)
class Finished:
    returncode: int
    stderr: bytes


class TimedOut(Exception):
    """The program outlived its timeout; its whole group was ended."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(f"did not finish within {timeout_s:g} s and was killed")
        self.timeout_s = timeout_s


_running: set[subprocess.Popen[bytes]] = set()
_running_lock = threading.Lock()


def run_program(
    argv: Sequence[str],
    *,
    timeout_s: float,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    grace_s: float = GRACE_S,
) -> Finished:
    """Run `argv` to its end in a session of its own, `stdin` on its standard input (none
    when None), its output dropped but for stderr. OSError when it cannot start; TimedOut
    when it outlived `timeout_s` (its whole process group is then gone)."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=None if env is None else dict(env),
        cwd=cwd,
        start_new_session=True,
    )
    with _running_lock:
        _running.add(proc)
    try:
        try:
            _, err = proc.communicate(stdin, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            end_group(proc, grace_s)
            raise TimedOut(timeout_s) from None
        except BaseException:
            end_group(proc, grace_s)
            raise
    finally:
        with _running_lock:
            _running.discard(proc)
    return Finished(proc.returncode, err or b"")


def end_group(proc: subprocess.Popen[bytes], grace_s: float = GRACE_S) -> None:
    """End `proc`'s process group (`proc` started in a session of its own): SIGTERM, SIGKILL
    for what is left after `grace_s`, and `proc` reaped. Also when `proc` itself has exited
    and left a child behind."""
    pgid = proc.pid
    _signal_group(pgid, signal.SIGTERM)
    if not _group_gone(proc, pgid, grace_s):
        _signal_group(pgid, signal.SIGKILL)
        _group_gone(proc, pgid, KILL_WAIT_S)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_WAIT_S)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_gone(proc: subprocess.Popen[bytes], pgid: int, timeout_s: float) -> bool:
    """Wait up to `timeout_s` for no process of the group to be left running (`proc`, our
    child, is reaped on the way; a zombie left for pid 1 to reap has ended)."""
    deadline = time.monotonic() + timeout_s
    step = 0.01
    while True:
        proc.poll()
        if not _group_running(pgid):
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        # Processes that are not our children cannot be waited on: poll, backing off.
        time.sleep(min(step, left))
        step = min(step * 2, 0.2)


def _group_running(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # (a member that changed its user)
    for member in psutil.process_iter(["status"]):
        with contextlib.suppress(OSError, psutil.Error):
            if os.getpgid(member.pid) == pgid and member.info["status"] != psutil.STATUS_ZOMBIE:
                return True
    return False


def windows_cwd(drive: Path = WINDOWS_DRIVE) -> str | None:
    """Where to start a Windows program from WSL: Windows' own drive when it is mounted;
    None (where vramtop runs) otherwise."""
    return str(drive) if drive.is_dir() else None


def _end_all_running() -> None:
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        end_group(proc, grace_s=0.5)


atexit.register(_end_all_running)
