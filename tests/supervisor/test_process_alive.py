"""Whether a recorded server process still runs (psutil, asked every second by housekeeping):
the same start and not a zombie is the same live process."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import psutil
import pytest

from tests.support.waiting import PROCESS_S, wait_until
from vramtop.supervisor import tree


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "30"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_live_process_is_alive_on_every_ask(child: subprocess.Popen[bytes]) -> None:
    started = psutil.Process(child.pid).create_time()
    for _ in range(3):
        assert tree.process_alive(child.pid, started)
    assert tree.process_alive(child.pid)  # (no start recorded: the pid alone)


def test_a_process_that_exited_is_dead_and_reaped(child: subprocess.Popen[bytes]) -> None:
    started = psutil.Process(child.pid).create_time()
    assert tree.process_alive(child.pid, started)
    child.kill()
    wait_until(
        lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE,
        deadline_s=PROCESS_S,
        what="the killed child a zombie",
    )
    assert not tree.process_alive(child.pid, started)  # a zombie: dead, and reaped
    with pytest.raises(psutil.NoSuchProcess):
        psutil.Process(child.pid)


def test_another_start_is_another_process(child: subprocess.Popen[bytes]) -> None:
    started = psutil.Process(child.pid).create_time()
    assert tree.process_alive(child.pid, started)
    assert not tree.process_alive(child.pid, started - 60)  # the pid, reused since
    assert tree.process_alive(child.pid, started)


def test_a_start_read_across_a_shifted_boot_time_is_the_same_process() -> None:
    """psutil reads a start as ticks since boot plus /proc/stat's boot time, whole seconds
    worked out from the wall clock: an adjusted clock moves it by a second, and a record made
    before reads one second off. That is the same process; half a second off is not."""
    import os

    import psutil

    from vramtop.supervisor.tree import process_alive, same_start

    start = psutil.Process(os.getpid()).create_time()
    for shift in (0.0, 0.03, 1.0, -1.0, 2.02):
        assert same_start(start + shift, start), shift
        assert process_alive(os.getpid(), start + shift), shift
    for shift in (0.5, -0.3, 3.0, 1.2):
        assert not same_start(start + shift, start), shift
        assert not process_alive(os.getpid(), start + shift), shift
