"""Bad arguments and unusable directories: a message naming the input and the fix, exit 2,
never a traceback or "unexpected error"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from vramtop import cli


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("VRAMTOP_HOME", str(home))
    return home


def _exit(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exc:  # argparse's usage errors
        return int(exc.code or 0)


def _clean(err: str) -> None:
    assert err.strip() and "Traceback" not in err and "unexpected error" not in err, err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["relaunch", "--demo", "--kv-cache-dtype", "bogus"], "not one of vLLM's KV cache"),
        (["relaunch", "--demo", "--kv-cache-dtype", "fp\udcff"], "not one of vLLM's KV cache"),
        (["relaunch", "--demo", "--max-model-len", "-5"], "at least 1 token"),
        (["relaunch", "--demo", "--max-model-len", "0"], "at least 1 token"),
        (["relaunch", "--demo", "--max-model-len", "99999999999"], "at most"),
        (["attach", "--pid", "-5"], "not a process id"),
        (["attach", "--pid", "0"], "not a process id"),
        (["attach", "--port", "70000"], "not a port"),
        (["logs", "-n", "-5"], "0 or more"),
        (["--interval", "1e11", "record", "out.jsonl", "--demo"], "at most 3600"),
        (["--interval", "1e11", "export", "--demo"], "at most 3600"),
        (["export", "--demo", "--interval", "1e11"], "at most 3600"),
        (["--once", "--interval", "1e11", "--demo"], "at most 3600"),
    ],
)
def test_an_argument_out_of_bounds_is_a_usage_error_naming_it(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit(argv) == 2
    err = capsys.readouterr().err
    _clean(err)
    assert words in err


def test_record_duration_0_says_what_is_wrong_and_not_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit(["record", str(tmp_path / "s.jsonl"), "--duration", "0"]) == 2
    err = capsys.readouterr().err
    assert "--duration must be more than 0" in err and "--interval" not in err


def test_a_profile_name_of_5000_characters_is_no_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _exit(["status", "--profile", "a" * 5000]) == 2
    err = capsys.readouterr().err
    _clean(err)
    assert "no profile named" in err and len(err) < 600


def test_a_home_linked_to_a_directory_everyone_can_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    public = tmp_path / "pub-0777"
    public.mkdir()
    public.chmod(0o777)
    link = tmp_path / "linked-home"
    link.symlink_to(public)
    monkeypatch.setenv("VRAMTOP_HOME", str(link))
    assert _exit(["status"]) == 2
    err = capsys.readouterr().err
    assert "writable by every user" in err and str(public) in err


def test_a_state_dir_linked_to_a_directory_everyone_can_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VRAMTOP_HOME")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    public = tmp_path / "pub-0777"
    public.mkdir()
    public.chmod(0o777)
    (tmp_path / "xdg-state").mkdir()
    (tmp_path / "xdg-state" / "vramtop").symlink_to(public)
    assert _exit(["status"]) == 2
    assert "writable by every user" in capsys.readouterr().err


def test_a_state_dir_replaced_by_a_file_is_a_message(
    _home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _home.mkdir(mode=0o700)
    (_home / "state").write_text("not a directory\n")
    for argv in (["start", "--demo"], ["--once", "--demo"], ["status"]):
        assert _exit(argv) == 2
        err = capsys.readouterr().err
        _clean(err)
        assert "is not a directory" in err and str(_home / "state") in err


def test_a_directory_below_the_state_dir_replaced_by_a_file_is_a_message(
    _home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (_home / "state").mkdir(parents=True, mode=0o700)
    _home.chmod(0o700)
    (_home / "state" / "demo").write_text("a file where the demo's directory goes\n")
    assert _exit(["start", "--demo"]) == 2
    err = capsys.readouterr().err
    _clean(err)
    assert str(_home / "state" / "demo") in err and "move it away" in err


def test_an_unwritable_log_dir_leaves_no_traceback_on_the_screen(_home: Path) -> None:
    # The own log cannot be opened (a directory stands where the file goes): warnings go to
    # stderr one line each, never as a traceback.
    (_home / "logs" / "vramtop.log").mkdir(parents=True)
    for path in (_home, _home / "logs"):
        path.chmod(0o700)
    env = {**os.environ, "VRAMTOP_HOME": str(_home)}
    done = subprocess.run(
        [sys.executable, "-m", "vramtop", "diagnose", str(_home / "missing.jsonl")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "not writing its own log" in done.stderr


numbers = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1e400", "-0", "0x10", "1_000", " 5", "", "٣", "1" * 400]),
    st.text(max_size=12),
)


@settings(max_examples=examples(60), deadline=None)
@given(
    flag=st.sampled_from(
        [["logs", "-n"], ["attach", "--pid"], ["attach", "--port"],
         ["relaunch", "--max-model-len"], ["calc", "--max-model-len"], ["calc", "--head-dim"],
         ["calc", "--total-gib"], ["--once", "--interval"], ["record", "--duration"]]
    ),
    value=numbers,
)  # fmt: skip
def test_any_number_given_to_a_flag_is_taken_or_a_usage_error(
    flag: list[str], value: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Parsed only: each flag's type is the boundary (what a command then does is its own).
    argv = [*flag, value]
    if flag[0] == "record":
        argv = ["record", str(tmp_path_factory.mktemp("r") / "s.jsonl"), *flag[1:], value]
    try:
        args = cli.parse_args(argv)
    except SystemExit as exc:
        assert exc.code == 2
        return
    for name in ("lines", "pid", "port", "max_model_len", "head_dim", "interval", "duration"):
        number = getattr(args, name, None)
        if isinstance(number, int | float) and not isinstance(number, bool):
            assert abs(number) <= 1e12


def test_import_of_an_endless_file_ends_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(["import", "/dev/zero", "--print"]) == 2
    err = capsys.readouterr().err
    _clean(err)
    assert "/dev/zero" in err and "not a launch script" in err
