"""The machine backend's frames carry an adaptive guard's budgets: read from the state file
the guard writes (`write_guard_state`) while that guard holds the profile's actor lock — a
real process here — and nothing once it has gone (its file stays, stale), nor without a
file, nor for a backend without a profile; read at most once every `adaptive_read_s`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from supervisor_helpers import fake_profile

from tests.support.ports import free_port
from vramtop.core.adaptive_words import AdaptiveState
from vramtop.core.model import GpuReading
from vramtop.machines.machine_backend import MachineBackend
from vramtop.machines.sampler import Sampler
from vramtop.supervisor import Supervisor
from vramtop.supervisor.actor import GUARD, ActorLock, guard_state_path, write_guard_state

NAME = "adapt"
DOWN = 1_700_000_000.0

# A guard, as far as the lock and the state file go: it takes the actor lock, writes its
# state, says so, and holds both until its stdin closes.
GUARD_CODE = f"""
import sys
from vramtop.supervisor.actor import GUARD, ActorLock, write_guard_state
lock = ActorLock({NAME!r}, GUARD)
assert lock.try_acquire()
write_guard_state({NAME!r}, outside=0.93, during=0.85, down={DOWN!r}, up=None)
print("ready", flush=True)
sys.stdin.read()
"""


class NoGpu:
    def read(self) -> GpuReading:
        return GpuReading(error="no GPU here")

    def close(self) -> None:
        pass


def _backend(ledger: Path, name: str = NAME) -> MachineBackend:
    sup = Supervisor(fake_profile(name, free_port(), ledger))
    backend = MachineBackend(sampler=Sampler(probe=NoGpu(), url=None), supervisor=sup)
    backend.adaptive_read_s = 0.0  # every tick looks (the throttle is tested on its own)
    return backend


def test_a_running_guards_state_is_in_the_frame_and_a_stale_one_is_not(
    home: Path, ledger: Path
) -> None:
    backend = _backend(ledger)
    try:
        assert backend.tick(log_limit=0).adaptive is None  # no guard, no file
        guard = subprocess.Popen(
            [sys.executable, "-c", GUARD_CODE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert guard.stdout is not None and guard.stdout.readline().strip() == "ready"
            assert ActorLock(NAME, GUARD).holder() is not None
            frame = backend.tick(log_limit=0)
            assert frame.adaptive == AdaptiveState(0.93, 0.85, DOWN, None)
            assert frame.adaptive.in_call
        finally:
            assert guard.stdin is not None
            guard.stdin.close()
            assert guard.wait(30) == 0
        # The guard has gone: its lock is free, its file is still there and says nothing.
        assert guard_state_path(NAME).exists()
        assert ActorLock(NAME, GUARD).holder() is None
        assert backend.tick(log_limit=0).adaptive is None
    finally:
        backend.close(stop_server=False)


def test_a_state_file_whose_writer_does_not_hold_the_lock_says_nothing(
    home: Path, ledger: Path
) -> None:
    backend = _backend(ledger)
    try:
        # Written by this process, which holds no lock: an earlier guard's file.
        write_guard_state(NAME, outside=0.93, during=None, down=None, up=None)
        assert backend.tick(log_limit=0).adaptive is None
        # Holding the lock as a guard (this process wrote the file): it is shown.
        with ActorLock(NAME, GUARD) as lock:
            assert lock.try_acquire()
            assert backend.tick(log_limit=0).adaptive == AdaptiveState(0.93)
    finally:
        backend.close(stop_server=False)


def test_read_at_most_once_every_adaptive_read_s(home: Path, ledger: Path) -> None:
    backend = _backend(ledger)
    backend.adaptive_read_s = 3600.0
    try:
        assert backend.tick(log_limit=0).adaptive is None  # read: no file
        with ActorLock(NAME, GUARD) as lock:
            assert lock.try_acquire()
            write_guard_state(NAME, outside=0.9, during=None, down=None, up=None)
            assert backend.tick(log_limit=0).adaptive is None  # the last answer, kept
            backend.adaptive_read_s = 0.0
            assert backend.tick(log_limit=0).adaptive == AdaptiveState(0.9)
    finally:
        backend.close(stop_server=False)


def test_a_backend_without_a_profile_has_none(home: Path) -> None:
    backend = MachineBackend(sampler=Sampler(probe=NoGpu(), url=None), supervisor=None)
    try:
        assert backend.adaptive_state() is None
        assert backend.tick(log_limit=0).adaptive is None
    finally:
        backend.close(stop_server=False)
