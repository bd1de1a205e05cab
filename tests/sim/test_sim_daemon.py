"""The simulated GPU daemon's lifecycle: one per socket however many start at once, and it
leaves by itself once nothing uses it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import psutil

from tests.support.waiting import PROCESS_S, wait_until
from vramtop.sim.world import ALREADY_SERVED
from vramtop.sim.world_protocol import WorldClient, WorldUnreachable


def _daemon(socket: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "vramtop.sim.world", "--socket", str(socket), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def test_daemons_started_at_once_leave_one_serving_the_socket(tmp_path: Path) -> None:
    socket = tmp_path / "gpu.sock"
    daemons = [_daemon(socket) for _ in range(3)]
    try:
        wait_until(
            lambda: sum(d.poll() is None for d in daemons) <= 1,
            deadline_s=PROCESS_S,
            what="all daemons but one gone",
        )
        running = [d for d in daemons if d.poll() is None]
        assert len(running) == 1
        assert {d.returncode for d in daemons if d not in running} == {ALREADY_SERVED}
        assert WorldClient(socket).request("ping")["ok"]
    finally:
        for d in daemons:
            d.kill()
            d.wait(5)


def test_an_unused_daemon_leaves_by_itself_and_a_used_one_stays(tmp_path: Path) -> None:
    used = _daemon(tmp_path / "used.sock", "--idle-exit", "1.5")
    unused = _daemon(tmp_path / "unused.sock", "--idle-exit", "1.5")
    try:
        client = WorldClient(tmp_path / "used.sock")

        def unused_gone() -> bool:
            with contextlib.suppress(WorldUnreachable):  # not listening yet
                client.request("ping")
            return unused.poll() is not None

        # Asked every 0.2 s, well inside its 1.5 s: the used one stays.
        wait_until(unused_gone, deadline_s=PROCESS_S, what="the unused daemon gone", poll_s=0.2)
        assert unused.poll() == 0  # left by itself
        assert used.poll() is None  # asked every 0.2 s: still there
        assert not (tmp_path / "unused.sock").exists()
    finally:
        for d in (used, unused):
            if psutil.pid_exists(d.pid):
                d.kill()
            d.wait(5)
