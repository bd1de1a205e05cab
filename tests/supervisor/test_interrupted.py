"""A vramtop that died half-way through a launch or a stop, and a stop whose memory the GPU
does not give back: status and stop say what is really there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from supervisor_helpers import fake_profile, ledger_empty

from tests.support.ports import free_port
from vramtop.core.model import ServerState
from vramtop.supervisor import Supervisor, state
from vramtop.supervisor.state import LAUNCHING, ServerRecord


def test_a_launch_whose_vramtop_died_before_spawning_is_not_starting_forever(
    home: Path, ledger: Path
) -> None:
    state.save(ServerRecord(profile="gone", state=LAUNCHING, launch_id="nothing-has-this-id"))
    sup = Supervisor(fake_profile("gone", free_port(), ledger))
    assert sup.housekeeping().state == ServerState.STOPPED


def test_a_stop_whose_vramtop_died_after_the_tree_ended_reads_stopped(
    home: Path, ledger: Path
) -> None:
    state.save(ServerRecord(profile="half", state="stopping", pid=2**22 + 7, stop_requested=True))
    sup = Supervisor(fake_profile("half", free_port(), ledger))
    assert sup.status().state == ServerState.STOPPING  # status only reads
    assert sup.housekeeping().state == ServerState.STOPPED
    rec = state.load("half")
    assert rec is not None and rec.state == "stopped"


def test_stop_says_when_the_gpu_still_holds_the_memory(
    home: Path, ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vramtop.supervisor import handle

    monkeypatch.setattr(handle, "MEMORY_RELEASE_TIMEOUT_S", 0.2)
    try:
        sup = Supervisor(fake_profile("held", free_port(), ledger), memory_released=lambda: False)
        assert sup.start(timeout_s=30).ok
        result = sup.stop()
        assert result.ok
        assert result.message.startswith("stopped, but the GPU still showed its memory held")
    finally:
        Supervisor(fake_profile("held", free_port(), ledger)).stop()
    assert ledger_empty(ledger)


def test_a_restart_whose_requests_are_lost_does_not_wait_the_whole_stop_timeout(
    home: Path, ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Confirmed with requests running: SIGKILL follows SIGTERM after a short grace instead
    of the profile's stop timeout (uvicorn can spend it waiting for connections to close)."""
    from vramtop.supervisor import actions, handle

    graces: list[float] = []
    real_end = handle.end_server

    def spy(rec: ServerRecord, **kw: Any) -> Any:
        graces.append(kw["stop_timeout_s"])
        return real_end(rec, **kw)

    monkeypatch.setattr(handle, "end_server", spy)
    profile = fake_profile("lost", free_port(), ledger).model_copy(update={"stop_timeout_s": 15})
    sup = Supervisor(profile, memory_released=lambda: ledger_empty(ledger))
    try:
        assert sup.start(timeout_s=30).ok
        assert sup.restart(timeout_s=30).ok
        assert sup.restart(timeout_s=30, requests_lost=True).ok
        assert graces == [15, actions.LOST_REQUESTS_GRACE_S]
        assert sup.status().state == ServerState.RUNNING
    finally:
        sup.stop()
    assert ledger_empty(ledger)
