"""The headless commands as a person types them: messages, exit codes and the files they leave."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from vramtop import cli

SCRIPTS = Path(__file__).resolve().parent.parent / "fixtures" / "scripts"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_vramtops_own_log_file_is_readable_only_by_the_user(home: Path) -> None:
    cli._log_to_file()
    log_file = home / "logs" / "vramtop.log"
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600


def test_import_with_a_bad_name_says_what_is_wrong_in_one_line(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["import", str(SCRIPTS / "field-report.sh"), "--name", "../x", "--print"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--name '../x': use letters" in err
    assert "pydantic" not in err and "validation error" not in err
    assert len(err.strip().splitlines()) == 1


def test_import_with_an_unusable_config_saves_nothing_and_says_why(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vramtop import locations

    config = locations.settings_file()
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('theme = ["not", "a", "name"]\n')
    script = str(SCRIPTS / "field-report.sh")
    code = cli.main(["import", script, "--name", "mine"])
    err = capsys.readouterr().err
    assert code == 2
    assert "field 'theme': must be a string" in err and "--force" not in err
    assert not locations.profiles_dir().joinpath("mine.toml").exists()  # nothing half-done
    config.write_text("")
    assert cli.main(["import", script, "--name", "mine"]) == 0  # the same import, once fixed


@pytest.mark.parametrize("command", ["start", "restart", "stop", "relaunch", "logs", "attach"])
def test_help_offers_json_only_where_json_is_printed(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    assert "--json" not in capsys.readouterr().out


def test_status_help_offers_json(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["status", "--help"])
    assert "--json" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["start", "restart"])
def test_start_and_restart_without_a_profile_say_how_to_get_one(
    command: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([command, "-q"]) == 2
    err = capsys.readouterr().err
    assert "vramtop import launch.sh" in err and "Traceback" not in err


def test_status_prints_the_command_shell_quoted(capsys: pytest.CaptureFixture[str]) -> None:
    import shlex

    from vramtop.commands.status import _print

    argv = [
        "vllm", "serve", "m", "--override-generation-config", '{"temperature": 0.6}',
        "--kv-cache-dtype", "fp8; rm -rf /",
    ]  # fmt: skip
    _print(False, {"profile": "p", "state": "stopped", "argv": argv})
    line = next(x for x in capsys.readouterr().out.splitlines() if "command:" in x)
    assert shlex.split(line.split("command: ", 1)[1]) == argv  # copy-paste safe


def test_status_prints_a_command_with_a_line_break_on_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An argument of several lines (an inline chat template) cannot pass for lines of the
    status, nor a terminal sequence reach the screen; bash still reads the same words."""
    import subprocess

    from vramtop.commands.status import _print

    template = "{{ messages }}\n  not healthy: fake\n\x1b[2J"
    argv = ["vllm", "serve", "m", "--chat-template", template]
    _print(False, {"profile": "p", "state": "stopped", "argv": argv})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "p: stopped" and len(lines) == 2, lines
    shown = lines[1].removeprefix("  command: ")
    assert shown.isprintable()
    read = subprocess.run(
        ["bash", "--norc", "-c", f"printf '%s\\0' {shown}"], capture_output=True, timeout=30
    )
    assert read.stdout.split(b"\0")[:-1] == [w.encode() for w in argv]
