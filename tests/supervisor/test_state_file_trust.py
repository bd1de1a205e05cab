"""The state file is not taken on its word: a record naming another process (its pid, its
start, its group, its tree) never makes a stop or a status signal or adopt that process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from supervisor_helpers import fake_profile

from tests.support.ports import free_port
from tests.support.waiting import stays
from vramtop.supervisor import state
from vramtop.supervisor.service import Supervisor
from vramtop.supervisor.state import Lifecycle, ServerRecord


@pytest.fixture
def bystander() -> subprocess.Popen[bytes]:
    """Someone else's process of the same user, in a group of its own."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
    )
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("launch_id", ["a-launch-id", None], ids=["launched", "adopted"])
def test_a_record_naming_another_process_never_signals_it(
    home: Path, ledger: Path, bystander: subprocess.Popen[bytes], launch_id: str | None
) -> None:
    profile = fake_profile("forged", free_port(), ledger)
    created = psutil.Process(bystander.pid).create_time()
    state.save(
        ServerRecord(
            profile="forged",
            state=Lifecycle.RUNNING,
            pid=bystander.pid,
            pgid=os.getpgid(bystander.pid),
            create_time=created,
            tree={str(bystander.pid): created},
            launch_id=launch_id,
            argv=["vllm", "serve", "m"],  # not what the bystander runs
            started_by="vramtop" if launch_id else "attached",
        )
    )
    sup = Supervisor(profile)
    result = sup.stop()
    assert not result.ok  # refused, naming the pid it left alone
    assert f"pid {bystander.pid}" in result.message
    stays(lambda: bystander.poll() is None, for_s=0.3, what="the forged record's pid not signalled")
    assert psutil.Process(bystander.pid).status() != psutil.STATUS_ZOMBIE
    assert sup.status().state.value != "running"
