"""The console's housekeeping thread sleeps while there is nothing to settle, and a tick that
finds something (a crash) wakes it at once: the tick only looks (`Supervisor.settling`)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from supervisor_helpers import fake_profile, ledger_empty

from tests.support.ports import free_port
from tests.support.waiting import PROCESS_S, stays, wait_until
from vramtop.core.model import GpuReading, ServerInfo, ServerState
from vramtop.machines.machine_backend import MachineBackend
from vramtop.machines.sampler import Sampler
from vramtop.supervisor import Supervisor

HOUR = 3600.0  # the housekeeping's own interval: longer than any test waits


class NoGpu:
    def read(self) -> GpuReading:
        return GpuReading(error="no GPU here")

    def close(self) -> None:
        pass


def _wait(predicate: Callable[[], object], timeout_s: float = PROCESS_S) -> bool:
    return bool(wait_until(predicate, deadline_s=timeout_s, what="(see the line above)"))


def test_a_tick_wakes_the_housekeeping_for_a_crash_and_not_for_a_live_server(
    home: Path, ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sup = Supervisor(fake_profile("woken", free_port(), ledger))
    steps: list[ServerInfo] = []
    stepped = threading.Event()
    real_housekeeping = sup.housekeeping

    def counted() -> ServerInfo:
        steps.append(info := real_housekeeping())
        stepped.set()
        return info

    monkeypatch.setattr(sup, "housekeeping", counted)
    sampler = Sampler(probe=NoGpu(), url=None, info=sup.status, log_path=lambda: sup.log_path)
    backend = MachineBackend(sampler=sampler, supervisor=sup)
    assert sup.start(timeout_s=30).ok
    try:
        backend.run_housekeeping(interval_s=HOUR)
        assert stepped.wait(30), "housekeeping never ran its first step"
        for _ in range(3):
            backend.tick()
        assert sup.settling() is None  # running, and its process lives: nothing to settle
        stays(lambda: len(steps) == 1, for_s=0.3, what="no second housekeeping step")

        pid = sup.status().pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert _wait(lambda: sup.settling() is not None)  # the tick's look sees the exit
        backend.tick()
        # Only the woken thread settles it: its own next step is an hour away.
        assert _wait(lambda: sup.status().state is ServerState.CRASHED)
        # The step saves the crash before it returns to the wrapper that counts it: wait for
        # the count rather than assert it the moment the state shows (2 of 5 runs failed).
        assert _wait(lambda: len(steps) >= 2)
    finally:
        backend.close(stop_server=True)
    assert ledger_empty(ledger)
