"""A deleted or damaged state file converges: the server's own process (the one on the
profile's port, carrying vramtop's launch id for this profile) is the truth the record is
rebuilt from, by `status`, `stop`, `start` and the console's housekeeping alike; a server
vramtop did not start is named, never adopted behind the person's back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from supervisor_helpers import fake_profile, ledger_empty, started_by_hand

from tests.support.ports import free_port
from vramtop import cli, profiles
from vramtop.core.model import ServerState
from vramtop.supervisor import Supervisor, state


def started(name: str, ledger: Path) -> Supervisor:
    profile = fake_profile(name, free_port(), ledger)
    profiles.save_profile(profile)
    sup = Supervisor(profile, memory_released=lambda: ledger_empty(ledger))
    assert sup.start().ok
    return sup


def status_json(name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert cli.main(["status", "--profile", name, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, dict)
    return data


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_deleted_state_file_is_rebuilt_by_status_and_stop_ends_the_server(
    home: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sup = started("lost", ledger)
    pid = sup.status().pid
    assert pid is not None
    state.state_path("lost").unlink()

    shown = status_json("lost", capsys)
    assert shown["state"] == "running" and shown["pid"] == pid
    assert "rebuilt from the running server" in str(shown["state_note"])
    assert "missing" in str(shown["state_note"])
    rec = state.load("lost")
    assert rec is not None and rec.started_by == "vramtop" and rec.launch_id

    state.state_path("lost").unlink()
    assert cli.main(["stop", "--profile", "lost", "-q"]) == 0
    assert "stopped" in capsys.readouterr().out
    assert not alive(pid) and ledger_empty(ledger)


def test_a_damaged_state_file_is_said_and_start_re_attaches_instead_of_port_in_use(
    home: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sup = started("damaged", ledger)
    pid = sup.status().pid
    state.state_path("damaged").write_text('{"profile": "damaged", "state": ')
    try:
        assert cli.main(["start", "--profile", "damaged", "-q"]) == 0
        out = capsys.readouterr()
        assert "re-attached" in out.out and "in use" not in out.err
        assert status_json("damaged", capsys)["pid"] == pid
    finally:
        assert sup.stop().ok
    state.state_path("damaged").write_text("not json")
    shown = status_json("damaged", capsys)
    assert shown["state"] == "stopped" and "unreadable" in str(shown["state_note"])


def test_a_server_vramtop_did_not_start_is_named_not_adopted_nor_stopped(
    home: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    profiles.save_profile(fake_profile("other", port, ledger))
    with started_by_hand(ledger, port, subprocess.DEVNULL) as pid:
        shown = status_json("other", capsys)
        assert shown["state"] == "stopped"
        assert f"pid {pid}" in str(shown["state_note"]) and "did not start" in str(
            shown["state_note"]
        )
        assert cli.main(["stop", "--profile", "other", "-q"]) == 0
        assert "vramtop attach adopts it" in capsys.readouterr().out
        assert alive(pid) and state.load("other") is None


def test_a_console_that_saw_the_server_keeps_it_and_rebuilds_the_file_at_once(
    home: Path, ledger: Path
) -> None:
    shell = started("watched", ledger)
    console = Supervisor(shell.profile, memory_released=lambda: ledger_empty(ledger))
    try:
        assert console.status().state is ServerState.RUNNING
        state.state_path("watched").unlink()
        # The tick's look: still the server it saw, and a step to take now (not in 5 s).
        assert console.status().state is ServerState.RUNNING
        step = console.settling()
        assert step is not None
        step()
        assert state.load("watched") is not None
        assert console.status().state is ServerState.RUNNING
    finally:
        assert shell.stop().ok


def test_url_on_the_profiles_port_held_by_a_hand_started_server_shows_that_server(
    home: Path, ledger: Path
) -> None:
    sup = started("mine", ledger)  # an earlier run: its record keeps its ready time
    assert sup.stop().ok
    port = sup.profile.port
    with started_by_hand(ledger, port, subprocess.DEVNULL) as pid:
        done = subprocess.run(
            [sys.executable, "-m", "vramtop", "--once", "--json", "--url", sup.profile.url],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        server = json.loads(done.stdout)["server"]
        assert server["healthy"] is True
        # Not the profile's stopped record beside a live server: watched as a URL.
        assert server["state"] is None and server["ready_s"] is None, server
        assert alive(pid)
