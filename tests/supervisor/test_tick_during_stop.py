"""The console's tick only reads: a stop under way on another thread (holding the profile's
lock, waiting for the tree to end) never holds it up, and housekeeping runs apart from it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from supervisor_helpers import NoGpu, fake_profile, ledger_empty

from tests.support.ports import free_port
from vramtop.core.model import ServerState
from vramtop.machines.machine_backend import MachineBackend
from vramtop.machines.sampler import Sampler
from vramtop.outcomes import ActionResult
from vramtop.supervisor import Supervisor, handle, state


def test_a_tick_returns_while_a_stop_is_blocked(
    home: Path, ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sup = Supervisor(fake_profile("held", free_port(), ledger))
    sampler = Sampler(probe=NoGpu(), url=None, info=sup.status, log_path=lambda: sup.log_path)
    backend = MachineBackend(sampler=sampler, supervisor=sup)
    assert sup.start(timeout_s=30).ok

    inside, release = threading.Event(), threading.Event()
    real_end = handle.end_server

    def blocked_end(rec: Any, **kw: Any) -> Any:
        inside.set()
        release.wait()  # the stop waits here, holding the lock, until the tick has returned
        return real_end(rec, **kw)

    monkeypatch.setattr(handle, "end_server", blocked_end)
    lock_asks: list[str] = []
    real_locked = state.locked

    def spied_locked(profile: str, timeout_s: float = 120.0) -> Any:
        lock_asks.append(threading.current_thread().name)
        return real_locked(profile, timeout_s)

    monkeypatch.setattr(state, "locked", spied_locked)
    results: list[ActionResult] = []
    stopper = threading.Thread(target=lambda: results.append(backend.stop()), name="stopper")
    stopper.start()
    try:
        assert inside.wait(30), "the stop never reached the tree"
        asked_before = len(lock_asks)
        sample = backend.tick().sample  # would wait on the stop if the tick tried the lock
        assert stopper.is_alive() and not results  # the stop is still blocked
        assert len(lock_asks) == asked_before  # the tick never asked for the lock
        assert sample.info is not None and sample.info.state == ServerState.STOPPING
    finally:
        release.set()
        stopper.join(60)
    assert results and results[0].ok
    backend.housekeeping()  # the step the console runs on its own timer
    info = backend.tick().sample.info
    assert info is not None and info.state == ServerState.STOPPED
    backend.close(stop_server=False)
    assert ledger_empty(ledger)
