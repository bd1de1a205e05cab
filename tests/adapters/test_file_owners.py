"""Files another user could write are never used, as sshd's StrictModes has it: every file
vramtop reads a command, a key, a pid or a setting from, and every directory from vramtop's
own down to it, belongs to the user (or root) and is writable by no one else; otherwise the
command ends with exit 2, naming the path and the `chmod`/`chown` that fixes it.

We run as root in CI here and there: another owner is uid 65534 (nobody)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from vramtop import cli, files, locations
from vramtop.event_log import EventLog
from vramtop.session.normal_store import NormalRateStore
from vramtop.supervisor import actor, door, state
from vramtop.tui.themes import load_themes

NOBODY = 65534
PROFILE = 'name = "p1"\nargv = ["vllm", "serve", "m", "--port", "8011"]\n'


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("VRAMTOP_HOME", str(path))
    return path


@pytest.fixture
def profile(home: Path) -> Path:
    path = locations.profiles_dir() / "p1.toml"
    path.write_text(PROFILE)
    path.chmod(0o600)
    return path


def _exit(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def _refused(argv: list[str], path: Path, fix: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "unexpected error" not in err, err
    assert f"`{fix} {path}`" in err, err
    assert len(err.strip().splitlines()) == 1, err


def _loose(mode: int) -> Callable[[Path], None]:
    return lambda path: path.chmod(mode)


def _nobodys(path: Path) -> None:
    os.chown(path, NOBODY, -1)


CHOWN = f"chown {pwd.getpwuid(os.getuid()).pw_name}"
LOOSE: list[tuple[Callable[[Path], None], str]] = [
    (_loose(0o666), "chmod go-w"),
    (_loose(0o620), "chmod go-w"),  # group-writable is enough
    (_nobodys, CHOWN),
]
LOOSE_DIR: list[tuple[Callable[[Path], None], str]] = [
    (_loose(0o777), "chmod go-w"),
    (_loose(0o770), "chmod go-w"),
    (_nobodys, CHOWN),
]


@pytest.mark.parametrize(("spoil", "fix"), LOOSE)
@pytest.mark.parametrize("argv", [["status", "--profile", "p1"], ["profile", "show", "p1"]])
def test_a_profile_another_user_can_write_is_refused(
    profile: Path,
    spoil: Callable[[Path], None],
    fix: str,
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    spoil(profile)
    _refused(argv, profile, fix, capsys)


@pytest.mark.parametrize(("spoil", "fix"), LOOSE_DIR)
@pytest.mark.parametrize("argv", [["status", "--profile", "p1"], ["lint", "p1"]])
def test_a_profiles_directory_another_user_can_write_is_refused(
    profile: Path,
    spoil: Callable[[Path], None],
    fix: str,
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    spoil(profile.parent)
    _refused(argv, profile.parent, fix, capsys)


def test_a_config_file_its_group_can_write_is_refused(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = locations.settings_file()
    path.write_text("interval_s = 2\n")
    path.chmod(0o660)
    _refused(["status"], path, "chmod go-w", capsys)


def test_a_demo_directory_everyone_can_write_is_refused(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locations.demo_dir().chmod(0o777)
    _refused(["status", "--demo"], locations.demo_dir(), "chmod go-w", capsys)


def test_a_card_demo_directory_everyone_can_write_is_refused(home: Path) -> None:
    from vramtop.machines.demo_world import demo_home

    card = locations.demo_dir() / "r9700"
    card.mkdir(mode=0o700)
    card.chmod(0o777)
    with pytest.raises(files.NotYours, match=f"chmod go-w {card}"):
        demo_home("r9700")


def test_a_state_file_another_user_owns_is_refused_not_rebuilt(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state.save(state.ServerRecord(profile="p1", pid=os.getpid()))
    path = state.state_path("p1")
    _nobodys(path)
    with pytest.raises(files.NotYours, match="chown"):
        state.load("p1")
    with pytest.raises(files.NotYours, match="chown"):
        state.unreadable("p1")
    assert path.stat().st_uid == NOBODY  # still there, as it was


def test_the_state_directory_its_group_can_write_refuses_the_state_file(home: Path) -> None:
    state.save(state.ServerRecord(profile="p1", pid=os.getpid()))
    locations.state_dir().chmod(0o770)
    with pytest.raises(files.NotYours, match=f"chmod go-w {locations.state_dir()}`"):
        state.load("p1")


@pytest.mark.parametrize(("spoil", "fix"), LOOSE)
def test_a_door_token_or_port_another_user_can_write_is_refused(
    home: Path, spoil: Callable[[Path], None], fix: str
) -> None:
    made = door.token("p1")
    spoil(door.token_path("p1"))
    with pytest.raises(files.NotYours, match=fix):
        door.current_token("p1")
    with pytest.raises(files.NotYours, match=fix):
        door.token("p1")  # never a token another user chose, nor one written over theirs
    door.token_path("p1").chmod(0o600)
    os.chown(door.token_path("p1"), os.getuid(), -1)
    assert door.current_token("p1") == made
    port = door.kept_internal_port("p1")
    spoil(door._port_path("p1"))
    with pytest.raises(files.NotYours, match=fix):
        door.kept_internal_port("p1")
    assert door._port_path("p1").read_text() == f"{port}\n"


def test_a_control_call_with_a_token_another_user_owns_asks_nothing(home: Path) -> None:
    door.token("p1")
    _nobodys(door.token_path("p1"))
    rec = state.ServerRecord(profile="p1", front_door="127.0.0.1:9", door_pid=None)
    assert door.hold(rec, 0.0) is None


def test_a_lasting_timeline_another_user_owns_is_refused_by_events(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = EventLog.for_profile("p1")
    assert log.append(1.0, "start")
    _nobodys(log.path)
    _refused(["events", "--profile", "p1"], log.path, CHOWN, capsys)
    assert not log.append(2.0, "stop")  # nor written to
    assert log.error is not None and "another user" in log.error


def test_normal_rates_another_user_can_write_are_not_used(home: Path) -> None:
    from vramtop.core.diagnosis.normal_rate import INTER_TOKEN_LATENCY, NormalRate

    store = NormalRateStore()
    store.save("k", NormalRate({INTER_TOKEN_LATENCY: {1: 77.0}}))
    assert store.load("k") is not None
    store.path.chmod(0o666)
    assert store.load("k") is None


def test_an_adaptive_state_another_user_owns_is_refused(home: Path) -> None:
    with actor.ActorLock("p1", actor.GUARD) as lock:
        assert lock.try_acquire()
        actor.write_guard_state("p1", outside=0.9, during=None, down=None, up=None)
        assert actor.read_guard_state("p1") is not None
        _nobodys(actor.guard_state_path("p1"))
        with pytest.raises(files.NotYours, match="chown"):
            actor.read_guard_state("p1")


def test_a_theme_another_user_can_write_is_skipped_with_a_notice(home: Path) -> None:
    themes = locations.user_themes_dir()
    themes.mkdir(mode=0o700)
    theme = themes / "mine.toml"
    theme.write_text('name = "mine"\nprimary = "#112233"\n')
    theme.chmod(0o666)
    loaded = load_themes([themes])
    assert loaded.themes == []
    assert len(loaded.notices) == 1 and f"chmod go-w {theme}" in loaded.notices[0]


def test_a_profile_linked_into_a_directory_others_can_write_is_refused(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A link the person made is followed (dotfiles): its target and every directory above
    # it are judged, up to / (it lies outside vramtop's directories).
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir(mode=0o755)
    target = dotfiles / "p1.toml"
    target.write_text(PROFILE)
    target.chmod(0o600)
    (locations.profiles_dir() / "p1.toml").symlink_to(target)
    assert _exit(["profile", "show", "p1"]) == 0
    capsys.readouterr()
    dotfiles.chmod(0o777)
    _refused(["profile", "show", "p1"], dotfiles, "chmod go-w", capsys)


def test_the_walk_stops_at_vramtops_own_directory(home: Path, profile: Path) -> None:
    # Above VRAMTOP_HOME lies pytest's tmp_path and /tmp (1777): not vramtop's to judge.
    assert locations.read_own(profile) == PROFILE.encode()
    assert _exit(["profile", "show", "p1"]) == 0


def test_a_lasting_timeline_that_is_a_link_is_said_not_shown_empty(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Neither written through (the link's target untouched) nor read as "no events yet".
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text('{"t": 1.0, "event": "start", "detail": {}}\n')
    log = EventLog.for_profile("p1")
    log.path.parent.mkdir(parents=True, exist_ok=True)
    log.path.symlink_to(elsewhere)
    assert not log.append(2.0, "stop")
    assert log.error is not None and "symbolic link" in log.error
    assert _exit(["events", "--profile", "p1"]) == 2
    out, err = capsys.readouterr()
    assert "no events" not in out
    assert f"{log.path} is a symbolic link" in err and "--remove-destination" in err
    assert elsewhere.read_text().count("\n") == 1


def test_a_config_file_that_is_a_link_is_read_through_it_but_not_written_over_it(
    profile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = tmp_path / "dotfiles" / "config.toml"
    kept.parent.mkdir()
    kept.write_text("interval_s = 2\n")
    locations.settings_file().symlink_to(kept)
    assert _exit(["status", "--profile", "p1"]) == 0  # read through the link
    capsys.readouterr()
    assert _exit(["profile", "set-default", "p1"]) == 2
    err = capsys.readouterr().err
    assert f"{locations.settings_file()} is a symbolic link to {kept}" in err, err
    assert locations.settings_file().is_symlink() and kept.read_text() == "interval_s = 2\n"


def test_bundled_themes_are_read_whoever_installed_them(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Part of the installed package (a shared virtual environment may be another user's):
    # as trusted as its code, not judged as a file of the user's.
    theirs = tmp_path / "bundled"
    shutil.copytree(locations.bundled_themes_dir(), theirs)
    for path in [theirs, *theirs.iterdir()]:
        os.chown(path, NOBODY, -1)
    monkeypatch.setattr(locations, "bundled_themes_dir", lambda: theirs)
    loaded = load_themes([theirs])
    assert loaded.notices == [] and loaded.themes


def _fix_in(err: str) -> str:
    """The command a refusal tells the person to run (between its backquotes)."""
    return err.split("`", 2)[1]


@pytest.mark.parametrize("spoil", [_loose(0o666), _nobodys])
def test_the_fix_a_refusal_names_works_as_given_in_a_path_with_spaces_and_dollars(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spoil: Callable[[Path], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Copied into a shell as printed, the command must fix the very file it names.
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "my vramtop $HOME 'x'"))
    path = locations.profiles_dir() / "p1.toml"
    path.write_text(PROFILE)
    path.chmod(0o600)
    spoil(path)
    assert _exit(["profile", "show", "p1"]) == 2
    fix = _fix_in(capsys.readouterr().err)
    subprocess.run(["bash", "-c", fix], check=True)
    capsys.readouterr()
    assert _exit(["profile", "show", "p1"]) == 0, capsys.readouterr().err


def test_the_fix_for_a_timeline_that_is_a_link_works_in_a_path_with_spaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "my vramtop $HOME"))
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text('{"t": 1.0, "event": "start", "detail": {}}\n')
    log = EventLog.for_profile("p1")
    log.path.parent.mkdir(parents=True, exist_ok=True)
    log.path.symlink_to(elsewhere)
    assert _exit(["events", "--profile", "p1"]) == 2
    subprocess.run(["bash", "-c", _fix_in(capsys.readouterr().err)], check=True)
    assert not log.path.is_symlink() and log.path.read_text() == elsewhere.read_text()


def test_the_fix_for_a_config_file_that_is_a_link_works_in_a_path_with_spaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "my vramtop $HOME"))
    (locations.profiles_dir() / "p1.toml").write_text(PROFILE)
    kept = tmp_path / "dotfiles" / "config.toml"
    kept.parent.mkdir()
    kept.write_text("interval_s = 2\n")
    locations.settings_file().symlink_to(kept)
    assert _exit(["profile", "set-default", "p1"]) == 2
    subprocess.run(["bash", "-c", _fix_in(capsys.readouterr().err)], check=True)
    assert not locations.settings_file().is_symlink()
    assert _exit(["profile", "set-default", "p1"]) == 0
