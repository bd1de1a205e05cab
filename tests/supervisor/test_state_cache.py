"""The supervisor reads its state file again only when it changed, and sees every change,
including one made by another vramtop (`vramtop stop` in another terminal)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from supervisor_helpers import fake_profile

from tests.support.ports import free_port
from vramtop.core.model import ServerState
from vramtop.supervisor import Supervisor, state
from vramtop.supervisor.state import RecordCache, ServerRecord


def _settle(profile: str) -> None:
    """Date the file back, as if saved a while ago (a file saved just now is never kept)."""
    ns = time.time_ns() - 60 * 10**9
    os.utime(state.state_path(profile), ns=(ns, ns))


def _count_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = state._read

    def counting(path: Path, profile: str) -> tuple[ServerRecord | None, str | None]:
        calls.append(path.name)
        return real(path, profile)

    monkeypatch.setattr(state, "_read", counting)
    return calls


def _ours(profile: str) -> ServerRecord:
    """A running server that is this test's own process, so it stays alive."""
    me = psutil.Process()
    return ServerRecord(
        profile=profile,
        state="running",
        pid=me.pid,
        create_time=me.create_time(),
        tree={str(me.pid): me.create_time()},
        argv=["vllm", "serve", "m"],
    )


def test_an_unchanged_file_is_read_once(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state.save(_ours("p"))
    _settle("p")
    loads = _count_loads(monkeypatch)
    cache = RecordCache()
    records = [cache.load("p") for _ in range(3)]
    assert len(loads) == 1
    assert records[0] == records[1] == records[2] == state.load("p")


def test_each_call_returns_its_own_copy(home: Path) -> None:
    state.save(_ours("p"))
    _settle("p")
    cache = RecordCache()
    first = cache.load("p")
    assert first is not None
    first.state = "stopping"
    first.tree.clear()
    first.argv.append("--changed")
    again = cache.load("p")
    assert again is not None and again == state.load("p")
    assert again.state == "running" and again.tree and again.argv == ["vllm", "serve", "m"]


def test_a_reader_shares_the_kept_record(home: Path) -> None:
    state.save(_ours("p"))
    _settle("p")
    cache = RecordCache()
    shared = cache.load("p", copy=False)
    assert shared is not None and shared is cache.load("p", copy=False)
    assert cache.load("p") is not shared  # a caller that changes it gets its own


def test_the_paths_are_found_once_while_the_home_stays(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found: list[str] = []
    real = state.state_path

    def counting(profile: str) -> Path:
        found.append(profile)
        return real(profile)

    monkeypatch.setattr(state, "state_path", counting)
    state.save(_ours("p"))
    _settle("p")
    found.clear()
    cache = RecordCache()
    for _ in range(3):
        assert cache.load("p") is not None
        assert cache.log_path("p") == state.log_path("p")
    assert found == ["p"]
    # Another home (as a test, or the demo, sets VRAMTOP_HOME): its files, at once.
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "other"))
    assert cache.load("p") is None
    assert cache.log_path("p") == state.log_path("p")
    assert str(cache.log_path("p")).startswith(str(tmp_path / "other"))


def test_a_file_saved_just_now_is_read_every_time(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two saves within one tick of the file system's clock could look alike (size, time,
    # a reused inode): a fresh file is not trusted to be unchanged.
    state.save(_ours("p"))
    loads = _count_loads(monkeypatch)
    cache = RecordCache()
    cache.load("p")
    cache.load("p")
    assert len(loads) == 2


def test_a_change_by_another_vramtop_is_seen_on_the_next_call(
    home: Path, ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state.save(_ours("p"))
    _settle("p")
    sup = Supervisor(fake_profile("p", free_port(), ledger))
    assert sup.status().state == ServerState.RUNNING
    loads = _count_loads(monkeypatch)
    assert sup.status().state == ServerState.RUNNING
    assert loads == []  # unchanged: neither read nor parsed again

    # Another process (it inherits VRAMTOP_HOME) records a stop. "running" and "stopped" are
    # the same length: the file's size alone would not tell.
    other = textwrap.dedent(
        """
        from vramtop.supervisor import state
        rec = state.load("p")
        rec.state = "stopped"
        state.save(rec)
        """
    )
    subprocess.run([sys.executable, "-c", other], check=True, timeout=60)
    assert sup.status().state == ServerState.STOPPED
    rec = sup.record()
    assert rec is not None and rec.state == "stopped"


def test_status_is_worked_out_again_only_when_the_record_changed(home: Path, ledger: Path) -> None:
    state.save(_ours("p"))
    _settle("p")
    sup = Supervisor(fake_profile("p", free_port(), ledger))
    first = sup.status()
    assert sup.status() is first  # the same kept record: the same answer, not a new one
    rec = sup.record()
    assert rec is not None
    rec.state = "stopped"
    state.save(rec)
    changed = sup.status()
    assert changed is not first and changed.state == ServerState.STOPPED
