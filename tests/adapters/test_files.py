"""vramtop's own files: never written through a link, 0600 in 0700 directories, a home other
users can write to refused."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from vramtop import cli, files, locations
from vramtop.machines.demo_world import demo_port
from vramtop.session.writer import SessionWriter
from vramtop.supervisor import launch, state


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("VRAMTOP_HOME", str(path))
    return path


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    victim.chmod(0o644)
    return victim


def test_a_link_at_the_server_log_is_refused_and_its_target_untouched(
    home: Path, tmp_path: Path
) -> None:
    victim = _victim(tmp_path)
    log = state.log_path("p")
    log.symlink_to(victim)
    with pytest.raises(files.UnsafeFile, match="symbolic link"):
        launch.write_marker(log, "start p")
    assert victim.read_text() == "precious\n" and _mode(victim) == 0o644


def test_a_link_at_the_state_file_is_replaced_not_written_through(
    home: Path, tmp_path: Path
) -> None:
    victim = _victim(tmp_path)
    state.state_path("p").symlink_to(victim)
    state.save(state.ServerRecord(profile="p"))
    assert victim.read_text() == "precious\n" and _mode(victim) == 0o644
    assert not state.state_path("p").is_symlink()
    assert json.loads(state.state_path("p").read_text())["profile"] == "p"
    assert _mode(state.state_path("p")) == 0o600


def test_a_link_at_the_lock_file_is_refused(home: Path, tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    state.lock_path("p").symlink_to(victim)
    with pytest.raises(files.UnsafeFile), state.locked("p", timeout_s=0.1):
        pass
    assert _mode(victim) == 0o644


def test_a_link_at_the_demo_port_file_is_replaced(home: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("not a port\n")
    (locations.demo_dir() / "server-port").symlink_to(victim)
    port = demo_port()
    assert victim.read_text() == "not a port\n"
    assert demo_port() == port


def test_a_link_at_vramtops_own_log_is_not_followed(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = _victim(tmp_path)
    locations.own_log_file().symlink_to(victim)
    assert cli.main(["profile", "list"]) == 0
    assert "symbolic link" in capsys.readouterr().err
    assert victim.read_text() == "precious\n" and _mode(victim) == 0o644


def test_everything_is_created_private(home: Path) -> None:
    state.save(state.ServerRecord(profile="p"))
    launch.write_marker(state.log_path("p"), "start p")
    locations.config_dir()
    for directory in (home, home / "state", home / "logs", home / "config"):
        assert _mode(directory) == 0o700, directory
    assert _mode(state.state_path("p")) == 0o600
    assert _mode(state.log_path("p")) == 0o600


def test_a_loose_existing_file_is_tightened(home: Path) -> None:
    log = state.log_path("p")
    log.write_text("old\n")
    log.chmod(0o644)
    launch.write_marker(log, "start p")
    assert _mode(log) == 0o600


def test_a_home_every_user_can_write_is_refused(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home.mkdir()
    os.chmod(home, 0o777)
    assert cli.main(["profile", "list"]) == 2
    assert "writable by every user" in capsys.readouterr().err
    assert not (home / "logs").exists()  # nothing was written there


def test_record_refuses_an_existing_file_without_force(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "kept.jsonl"
    target.write_text("keep me\n")
    assert cli.main(["record", str(target), "--url", "http://127.0.0.1:9", "--duration", "1"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert target.read_text() == "keep me\n"


def test_a_recording_is_private_and_never_replaces_a_file_unasked(tmp_path: Path) -> None:
    path = tmp_path / "rec" / "s.jsonl"
    with SessionWriter(path, {"started_at": "x"}, replace=False):
        pass
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    with pytest.raises(FileExistsError):
        SessionWriter(path, {"started_at": "y"}, replace=False)
    with SessionWriter(path, {"started_at": "z"}):
        pass
    assert '"z"' in path.read_text()
