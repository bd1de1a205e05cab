"""A directory (or anything not a regular file) where vramtop reads one of its files is
refused naming it, exit 2: never "Is a directory: 4" (the descriptor's number) nor a
traceback with exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_run import exit_code
from vramtop import locations
from vramtop.event_log import EventLog
from vramtop.supervisor import state

PROFILE = 'name = "p1"\nargv = ["vllm", "serve", "m", "--port", "8011"]\n'


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("VRAMTOP_HOME", str(path))
    return path


def _one_clean_line(err: str) -> None:
    assert "Traceback" not in err and "unexpected error" not in err and "Errno" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_a_timeline_that_is_a_directory_is_refused_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = EventLog.for_profile("p1").path
    path.mkdir(mode=0o700)
    (locations.profiles_dir() / "p1.toml").write_text(PROFILE)
    assert exit_code(["events", "--profile", "p1"]) == 2
    err = capsys.readouterr().err
    _one_clean_line(err)
    assert f"{path} is not a regular file" in err
    assert path.is_dir()  # nothing of the person's removed


def test_a_profile_that_is_a_directory_is_refused_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = locations.profiles_dir() / "p1.toml"
    path.mkdir(mode=0o700)
    for argv in (["profile", "show", "p1"], ["status", "--profile", "p1"], ["lint", "p1"]):
        assert exit_code(argv) == 2
        err = capsys.readouterr().err
        _one_clean_line(err)
        assert f"{path} is not a regular file" in err


def test_a_state_file_that_is_a_directory_is_said_in_words(
    capsys: pytest.CaptureFixture[str],
) -> None:
    (locations.profiles_dir() / "p1.toml").write_text(PROFILE)
    path = state.state_path("p1")
    path.mkdir(mode=0o700)
    assert exit_code(["status", "--profile", "p1"]) == 0  # no server of p1: it is stopped
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "Errno" not in out + err
    assert f"the state file {path} was unreadable ({path} is not a regular file" in out
    assert path.is_dir()


def test_a_state_file_that_cannot_be_written_anew_says_what_stands_there() -> None:
    from vramtop import files

    path = state.state_path("p1")
    path.mkdir(mode=0o700)
    with pytest.raises(OSError) as caught:
        files.write_atomic(path, b"{}")
    words = files.problem_words(caught.value)
    assert words is not None and f"cannot write {path}" in words
    assert "a directory stands where vramtop keeps a file: move it away" in words
