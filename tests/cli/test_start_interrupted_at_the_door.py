"""Ctrl+C while `vramtop start --demo` waits for its front door to answer (the door's start
takes the most of a second, more on a busy machine). Before, the door went on running with no
record naming it: `vramtop stop --demo` said "not running", and the next start refused, its
port "already in use by" the door. Now the interrupted start ends the door it started, and
where it cannot (interrupted inside the spawn itself, or killed), the next `stop` or start
ends the door no record names."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.support.waiting import PROCESS_S, wait_until


def vramtop(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vramtop", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, VRAMTOP_HOME=str(home), VRAMTOP_SIM_STARTUP_S="0.3"),
    )


def door_of(home: Path) -> psutil.Process | None:
    """The front door process started for `home` (its token file is under it), if one runs."""
    for proc in psutil.process_iter(["cmdline"]):
        argv = proc.info["cmdline"] or []
        if "vramtop.frontdoor" in argv and any(str(home) in a for a in argv):
            return proc
    return None


def gone(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sent", "ended_with"),
    [(signal.SIGINT, (130, -signal.SIGINT)), (signal.SIGKILL, (-signal.SIGKILL,))],
    ids=["ctrl-c", "killed"],
)
def test_a_start_stopped_while_the_door_starts_leaves_no_door_behind(
    tmp_path: Path, sent: signal.Signals, ended_with: tuple[int, ...]
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    start = subprocess.Popen(
        [sys.executable, "-m", "vramtop", "start", "--demo"],
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, VRAMTOP_HOME=str(home), VRAMTOP_SIM_STARTUP_S="0.3"),
        # A person's Ctrl+C at a terminal (a runner in the background may ignore SIGINT, and
        # its children with it).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    door = None
    try:
        # Interrupted as soon as the door's process runs: it answers only once Python and
        # aiohttp have loaded, which the start waits for.
        door = wait_until(lambda: door_of(home), deadline_s=60, what="the door's process")
        start.send_signal(sent)
        _, err = start.communicate(timeout=60)
        assert start.returncode in ended_with, err
        # Whatever the start had reached, `stop` leaves no door: ended by the start, or named
        # by its record (then stopped here).
        stopped = vramtop(home, "stop", "--demo")
        assert stopped.returncode == 0, stopped.stderr
        wait_until(
            lambda: gone(door), deadline_s=PROCESS_S, what=f"the door (pid {door.pid}) ended"
        )
        # And the next start is not refused for the door's port.
        again = vramtop(home, "start", "--demo")
        assert again.returncode == 0, again.stderr
    finally:
        start.kill()
        vramtop(home, "stop", "--demo", "--all", "-q")
        if door is not None and not gone(door):
            door.kill()
