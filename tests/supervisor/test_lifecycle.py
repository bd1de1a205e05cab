"""The supervisor against real processes: a small fake server (tests/supervisor/fake_server.py)
whose child, like vLLM's EngineCore, survives a SIGKILL of its parent."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import psutil
from supervisor_helpers import FAKE_SERVER, fake_profile, healthy, ledger_empty

from tests.support import http
from tests.support.ports import free_port
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.core.model import ServerState
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.supervisor import Supervisor, state


def supervisor(name: str, ledger: Path, **kw: object) -> Supervisor:
    return Supervisor(
        fake_profile(name, free_port(), ledger, **kw),  # type: ignore[arg-type]
        memory_released=lambda: ledger_empty(ledger),
    )


def tree_gone(pids: tuple[int, ...]) -> bool:
    return not [p for p in pids if psutil.pid_exists(p) and _not_zombie(p)]


def _not_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def cache_util(url: str) -> str:
    text = http.get(f"{url}/metrics", timeout=2).text
    return text.split('gpu_memory_utilization="')[1].split('"')[0]


def test_start_restart_relaunch_stop_accounts_for_every_process(home: Path, ledger: Path) -> None:
    sup = supervisor("life", ledger)
    words: list[str] = []
    result = sup.start(progress=words.append)
    assert result.ok, result
    assert words[-1] == "ready" and "loading weights" in words and "capturing graphs" in words
    # Launched first; the phases come from the log's own lines, never guessed before them.
    assert words[0] == "launching" and words.index("loading weights") > 0
    first = sup.status()
    assert first.state == ServerState.RUNNING and first.ready_s is not None
    assert len(first.pids) == 2  # the API server and its engine child
    assert http.get(f"{sup.profile.url}/health").status_code == 200

    assert sup.restart().ok
    second = sup.status()
    assert second.pid != first.pid and tree_gone(first.pids)

    words.clear()
    assert sup.relaunch(RelaunchOrder(FlagChange(0.85)), progress=words.append).ok
    assert words[:2] == ["stopping", "memory released"]
    third = sup.status()
    assert tree_gone(second.pids)
    assert third.budget == 0.85
    assert cache_util(sup.profile.url) == "0.85"
    assert [c.new for c in sup.profile.history] == ["0.85"]

    assert sup.stop().ok
    stopped = sup.status()
    assert stopped.state == ServerState.STOPPED
    # No process is left to name: the stopped run's pid is not shown as if it were there.
    assert stopped.pid is None and stopped.pgid is None and stopped.pids == ()
    assert tree_gone(third.pids)
    assert ledger_empty(ledger)
    log = sup.log_path.read_text()
    assert log.count("Starting vLLM server") == 3
    assert log.count("=== vramtop: start") == 3


def test_files_are_private_and_hold_no_secret(home: Path, ledger: Path) -> None:
    sup = supervisor("secret", ledger)
    assert sup.start().ok
    try:
        path = state.state_path("secret")
        for f in (path, sup.log_path):
            assert stat.S_IMODE(f.stat().st_mode) == 0o600
        raw = path.read_text()
        assert "sekrit-key-123" not in raw
        assert "sekrit-key-123" not in sup.log_path.read_text()
        assert "sekrit-key-123" not in " ".join(sup.status().argv)
        data = json.loads(raw)
        assert data["pid"] == data["pgid"] and data["started_by"] == "vramtop"
    finally:
        sup.stop()


def test_a_second_vramtop_reattaches_instead_of_starting_twice(home: Path, ledger: Path) -> None:
    sup = supervisor("twice", ledger)
    assert sup.start().ok
    try:
        other = Supervisor(sup.profile)
        result = other.start()
        assert result.ok and "re-attached" in result.message
        assert other.status().pid == sup.status().pid
        # (the engine writes its ledger file once its own interpreter is up: on a busy
        # machine, after the server answered /health)
        wait_until(lambda: any(ledger.iterdir()), deadline_s=PROCESS_S, what="the engine holding")
        assert len(list(ledger.iterdir())) == 1  # one engine, not two
    finally:
        assert Supervisor(sup.profile, memory_released=lambda: ledger_empty(ledger)).stop().ok
    assert ledger_empty(ledger)


def test_sigkill_of_the_api_server_is_a_crash_and_its_engine_is_ended(
    home: Path, ledger: Path
) -> None:
    sup = supervisor("crash", ledger)
    assert sup.start().ok
    info = sup.status()
    os.kill(info.pid or 0, signal.SIGKILL)
    engine = [p for p in info.pids if p != info.pid]
    wait_until(
        lambda: sup.housekeeping().state == ServerState.CRASHED,
        deadline_s=PROCESS_S,
        what="the crash seen by housekeeping",
    )
    crashed = sup.status()
    assert crashed.state == ServerState.CRASHED
    assert crashed.returncode == -signal.SIGKILL  # we are its parent here
    assert tree_gone(tuple(engine)) and ledger_empty(ledger)
    assert "exited unexpectedly" in (crashed.last_error or "")


def test_a_taken_port_is_reported_and_nothing_is_launched(home: Path, ledger: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        sup = Supervisor(fake_profile("busy", port, ledger))
        result = sup.start()
    assert not result.ok
    assert f"port {port} is already in use by pid {os.getpid()}" in result.message
    assert list(ledger.iterdir()) == []
    assert state.load("busy") is None


def test_no_room_for_the_budget_reports_the_cause_and_what_fits(home: Path, ledger: Path) -> None:
    sup = supervisor("oom", ledger, util=0.95, FAKE_FREE_FRACTION="0.9")
    words: list[str] = []
    result = sup.start(progress=words.append)
    assert not result.ok and words[-1] == "failed"
    assert "out of memory" in result.message
    # free 28.66 of 31.84 GiB: 0.90 needs 28.66 GiB, all of it; 0.89 (28.34) leaves the start
    # margin of what is free
    assert "largest budget that fits now is 0.89" in result.message
    rec = state.load("oom")
    assert rec is not None and rec.error_kind == "out_of_memory"
    assert rec.largest_fitting_budget == 0.89 and rec.returncode == 1
    assert sup.status().state == ServerState.CRASHED


def test_attach_adopts_a_server_started_elsewhere_and_restart_supervises_it(
    home: Path, ledger: Path
) -> None:
    port = free_port()
    argv = [sys.executable, str(FAKE_SERVER), "m", "--port", str(port)]
    env = {**os.environ, "FAKE_LEDGER_DIR": str(ledger), "FAKE_STARTUP_S": "0.1"}
    outside = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        wait_until(lambda: healthy(port), deadline_s=PROCESS_S, what="the fake server's /health")
        sup = Supervisor(
            fake_profile("adopt", port, ledger), memory_released=lambda: ledger_empty(ledger)
        )
        result = sup.attach(port=port)
        assert result.ok, result
        rec = state.load("adopt")
        assert rec is not None and rec.started_by == "attached" and rec.pid == outside.pid
        assert sup.status().state == ServerState.RUNNING

        assert sup.restart().ok
        outside.wait(timeout=5)  # the adopted one is gone ...
        rec = state.load("adopt")
        assert rec is not None and rec.started_by == "vramtop"  # ... and ours runs instead
        assert rec.argv[1:] == argv[1:]
        # The new server's engine writes its ledger file once its own interpreter is up: on a
        # busy machine, after the server answered /health.
        wait_until(
            lambda: len(list(ledger.iterdir())) == 1,
            deadline_s=PROCESS_S,
            what="one engine holding",
        )
    finally:
        if outside.poll() is None:
            os.killpg(outside.pid, signal.SIGKILL)
        Supervisor(fake_profile("adopt", port, ledger)).stop()
    assert ledger_empty(ledger)
