"""Nesting deeper than a parser recurses (100,000 `[`) is damage like any other: a damaged
line of a JSON-lines file is skipped and counted, a damaged file of the person's is refused
with exit 2 naming it, one of vramtop's own is rebuilt; never "maximum recursion depth
exceeded" with exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_run import exit_code
from vramtop import locations
from vramtop.event_log import EventLog
from vramtop.session.normal_store import NormalRateStore
from vramtop.sources.http_answer import Answer
from vramtop.sources.scraper import _json
from vramtop.supervisor import actor, state
from vramtop.tui.themes import load_themes

DEEP = "[" * 100_000
PROFILE = 'name = "p1"\nargv = ["vllm", "serve", "m", "--port", "8011"]\n'


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("VRAMTOP_HOME", str(path))
    return path


def _clean(err: str) -> None:
    assert "recursion" not in err and "unexpected error" not in err and "Traceback" not in err


def test_a_config_file_nested_too_deeply_is_refused_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    locations.settings_file().write_text(f"interval_s = {DEEP}\n")
    assert exit_code(["status"]) == 2
    err = capsys.readouterr().err
    _clean(err)
    assert f"{locations.settings_file()}: not valid TOML: nested too deeply" in err


def test_a_profile_nested_too_deeply_is_refused_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = locations.profiles_dir() / "p1.toml"
    path.write_text(PROFILE + f"x = {DEEP}\n")
    for argv in (["status", "--profile", "p1"], ["lint", "p1"], ["profile", "show", "p1"]):
        assert exit_code(argv) == 2
        err = capsys.readouterr().err
        _clean(err)
        assert f"{path}: not valid TOML: nested too deeply" in err


def test_a_timeline_line_nested_too_deeply_is_skipped_and_counted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = EventLog.for_profile("p1")
    assert log.append(1_700_000_000.0, "start")
    with log.path.open("a") as f:
        f.write(DEEP + "\n")
    assert log.append(1_700_000_060.0, "stop")
    assert [e.name for e in log.read()] == ["start", "stop"] and log.skipped == 1
    assert exit_code(["events", "--profile", "p1"]) == 0
    out, err = capsys.readouterr()
    _clean(err)
    assert "1 damaged line(s)" in err and "start" in out and "stop" in out


def test_a_state_file_nested_too_deeply_reads_as_damaged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    locations.profiles_dir().joinpath("p1.toml").write_text(PROFILE)
    state.state_path("p1").write_text(DEEP)
    assert state.load("p1") is None  # rebuilt from the process, as a damaged one is
    assert state.unreadable("p1") == "nested too deeply"
    code = exit_code(["status", "--profile", "p1"])
    _clean(capsys.readouterr().err)
    assert code != 1


def test_normal_rates_nested_too_deeply_are_ignored_as_damaged() -> None:
    store = NormalRateStore()
    store.path.write_text(DEEP)
    assert store.load("k") is None


def test_an_adaptive_state_or_lock_nested_too_deeply_reads_as_damaged() -> None:
    lock = actor.ActorLock("p1", actor.GUARD)
    assert lock.try_acquire()
    try:
        actor.write_guard_state("p1", outside=0.9, during=None, down=None, up=None)
        actor.guard_state_path("p1").write_text(DEEP)
        assert actor.read_guard_state("p1") is None
        lock.path.write_text(DEEP[:4000])  # who holds the lock, as its file says
        holder = actor.ActorLock("p1", actor.CONSOLE, lock.path).holder()
    finally:
        lock.release()
    assert holder == {
        "pid": None,
        "kind": None,
        "since": None,
        "auto_remedy": None,
        "asked_by": None,
    }


def test_a_theme_nested_too_deeply_is_skipped_with_a_notice() -> None:
    themes = locations.user_themes_dir()
    themes.mkdir(mode=0o700)
    (themes / "deep.toml").write_text(f"name = {DEEP}\n")
    loaded = load_themes([themes])
    assert loaded.themes == [] and "deep.toml is broken" in loaded.notices[0]


def test_an_import_config_nested_too_deeply_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "deep.yaml").write_text(f"max-model-len: {DEEP}\n")
    script = tmp_path / "launch.sh"
    script.write_text("vllm serve m --config deep.yaml\n")
    assert exit_code(["import", str(script), "--name", "p1"]) == 2
    err = capsys.readouterr().err
    _clean(err)
    assert f"{tmp_path / 'deep.yaml'}: not valid YAML: nested too deeply" in err


def test_a_server_answer_nested_too_deeply_reads_as_no_json() -> None:
    assert _json(Answer(200, DEEP)) == {}
