"""An attached server's output: its own file when it writes to one (found, or given with
--log), else a clear "its output goes elsewhere", never an earlier server's log as its own."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
from supervisor_helpers import NoGpu, fake_profile, started_by_hand

from tests.support.ports import free_port
from vramtop import cli
from vramtop.commands.status import live_pids
from vramtop.machines.machine_backend import LOG_ELSEWHERE, MachineBackend
from vramtop.machines.sampler import Sampler
from vramtop.profiles import save_profile
from vramtop.supervisor import Supervisor, state
from vramtop.supervisor.adoption import is_server_process


def console_backend(sup: Supervisor) -> MachineBackend:
    sampler = Sampler(
        probe=NoGpu(),
        url=None,
        info=sup.status,
        log_path=lambda: sup.log_path,
    )
    return MachineBackend(sampler=sampler, supervisor=sup)


def previous_servers_log(name: str) -> None:
    """What vramtop's own log of this profile holds: an earlier server's last words."""
    path = state.log_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("INFO: Shutting down\nINFO: Finished server process [1234]\n")


def test_a_server_writing_to_a_file_is_shown_from_that_file(
    home: Path, ledger: Path, tmp_path: Path, capsys: Any
) -> None:
    port = free_port()
    previous_servers_log("own")
    out = tmp_path / "by-hand.log"
    with out.open("w") as stdout, started_by_hand(ledger, port, stdout) as pid:
        save_profile(fake_profile("own", port, ledger))
        sup = Supervisor(fake_profile("own", port, ledger))
        result = sup.attach(port=port)
        assert result.ok and str(out) in result.message
        assert sup.log_path == out
        backend = console_backend(sup)
        try:
            backend.tick()
            lines = backend.log_lines()
        finally:
            backend.close(stop_server=False)
        assert lines and not any("Shutting down" in line for line in lines)
        assert backend.log_notice() is None
        assert cli.main(["status", "--profile", "own", "--json"]) == 0
        printed = capsys.readouterr().out
        assert str(out) in printed and str(pid) in printed


def test_a_server_whose_output_goes_elsewhere_says_so(
    home: Path, ledger: Path, capsys: Any
) -> None:
    port = free_port()
    previous_servers_log("term")
    with started_by_hand(ledger, port, subprocess.DEVNULL):
        save_profile(fake_profile("term", port, ledger))
        sup = Supervisor(fake_profile("term", port, ledger))
        result = sup.attach(port=port)
        assert result.ok and "goes elsewhere" in result.message and "--log" in result.message
        assert sup.log_path is None
        backend = console_backend(sup)
        try:
            backend.tick()
            assert backend.log_lines() == []  # not the previous server's shutdown
            assert backend.log_notice() == LOG_ELSEWHERE
        finally:
            backend.close(stop_server=False)
        assert cli.main(["logs", "--profile", "term"]) == 2
        assert "goes elsewhere" in capsys.readouterr().err
        assert cli.main(["status", "--profile", "term"]) == 0
        printed = capsys.readouterr().out
        assert "ready time unknown" in printed and "None" not in printed
        assert "its output goes elsewhere" in printed


def test_attach_log_names_the_file(home: Path, ledger: Path, tmp_path: Path) -> None:
    port = free_port()
    given = tmp_path / "vllm.log"
    given.write_text("INFO: written by the launcher script\n")
    with started_by_hand(ledger, port, subprocess.DEVNULL):
        sup = Supervisor(fake_profile("given", port, ledger))
        assert sup.attach(port=port, log=given).ok
        assert sup.log_path == given
    assert cli.main(["attach", "--port", str(port), "--log", str(tmp_path / "nope.log")]) == 2


def test_status_lists_the_live_processes_only() -> None:
    me = psutil.Process()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    tree = {str(me.pid): me.create_time(), str(child.pid): time.time()}
    assert live_pids((me.pid, child.pid), tree) == [me.pid]
    # A pid given to another process since the tree saw it is not the server's.
    assert live_pids((me.pid,), {str(me.pid): me.create_time() - 100}) == []


def test_attach_climbs_from_the_engine_to_the_api_server_but_not_to_a_shell() -> None:
    assert is_server_process([sys.executable, "-m", "vllm.entrypoints.openai.api_server"])
    assert is_server_process([sys.executable, "-m", "vramtop.sim.server", "m"])
    assert not is_server_process(["bash", "-c", "cd /srv && vllm serve m --port 8000"])
    assert not is_server_process(["/bin/sh", "serve_vllm.sh"])
    assert not is_server_process([])
