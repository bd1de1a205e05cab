"""`vramtop guard`'s command line: the unit it prints, and bad input refused in words."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import systemd_unit
from tests.support.cli_run import run_apart
from tests.support.examples import examples


def vramtop(
    *args: str, home: Path, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(env or {}), "VRAMTOP_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "vramtop", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def printed_here(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`vramtop ARGS` for what it only prints (a unit, a refusal), run through the command
    line in the test's own process: a process of its own cost a quarter of a second of CPU
    each. `vramtop` runs one where the process is the subject (the unit's own command)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VRAMTOP_HOME", str(home))
        code, out, err = run_apart(list(args))
    return subprocess.CompletedProcess(["vramtop", *args], code, out, err)


def saved_profile(home: Path, name: str) -> None:
    """A profile of that name under `home`, as `vramtop import` leaves one."""
    profiles = home / "config" / "profiles"
    profiles.mkdir(parents=True, exist_ok=True)
    (profiles / f"{name}.toml").write_text(
        f'name = "{name}"\nargv = ["/nonexistent/vllm", "serve", "m"]\nport = 9\n'
    )


def test_print_unit_runs_this_vramtop_and_restarts_on_failure(tmp_path: Path) -> None:
    saved_profile(tmp_path, "work")
    done = vramtop("guard", "--profile", "work", "--print-unit", home=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    exec_start = next(line for line in lines if line.startswith("ExecStart="))
    words = exec_start.removeprefix("ExecStart=").split()
    assert Path(words[0]).is_absolute() and Path(words[0]).exists()
    assert words[-3:] == ["guard", "--profile", "work"]
    assert "Restart=on-failure" in lines
    assert "KillMode=process" in lines  # stopping the unit leaves vLLM serving
    assert "WantedBy=default.target" in lines


def test_print_unit_runs_the_guard_as_it_was_asked_for(tmp_path: Path) -> None:
    """The unit's guard is this one: its machine and every option given, not the defaults."""
    done = printed_here(
        "guard", "--demo", "--wsl", "--card", "r9700", "--auto-remedy", "between-turns",
        "--adaptive", "--settle", "90", "--on-finding", "notify me", "--print-unit",
        home=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    exec_start = next(line for line in done.stdout.splitlines() if line.startswith("ExecStart="))
    tail = exec_start.split(" guard ", 1)[1]
    assert tail == (
        '--demo --wsl --card r9700 --on-finding "notify me" --auto-remedy between-turns '
        "--adaptive --settle 90"
    )
    # What the guard would refuse, the unit is not printed for.
    refused = printed_here("guard", "--wsl", "--print-unit", home=tmp_path)
    assert refused.returncode == 2 and "--wsl only applies" in refused.stderr
    assert "ExecStart" not in refused.stdout


def unit_settings(printed: str) -> dict[str, str]:
    """The unit's [Service] settings as systemd reads them (each key once)."""
    read = systemd_unit.settings(printed)
    service = [(key, value) for section, key, value in read if section == "Service"]
    assert len({key for key, _ in service}) == len(service), service
    return dict(service)


def test_a_value_that_would_add_a_line_to_the_unit_is_refused_and_nothing_printed(
    tmp_path: Path,
) -> None:
    injected = "echo\nExecStart=/bin/touch /tmp/X\n#"
    done = printed_here("guard", "--demo", "--on-finding", injected, "--print-unit", home=tmp_path)
    assert done.returncode == 2, done.stdout
    assert done.stdout == ""
    assert done.stderr == (
        "vramtop guard: --print-unit: --on-finding has a line break (character 5), which a "
        "systemd unit cannot hold; give it without\n"
    )


@settings(max_examples=examples(300), deadline=None)
@given(
    on_finding=st.text(alphabet=st.sampled_from(" \n\r\t\0\"'\\$%;#=[]ax\u2028"), max_size=30)
    | st.text(max_size=30),
    front_door=st.none() | st.text(max_size=10),
)
def test_any_unit_printed_has_its_own_settings_only_and_the_words_asked(
    on_finding: str, front_door: str | None
) -> None:
    """Whatever the values, a unit that is printed has exactly its settings (no line added by
    a value) and its command is the guard's words as given; the others are refused."""
    from vramtop.commands.guard import GuardOptions, unit_text
    from vramtop.commands.shared_options import Target
    from vramtop.core.unit_words import UnitValueError
    from vramtop.guard.unit import vramtop_command

    options = GuardOptions(
        target=Target(demo=True, front_door=front_door), on_finding=on_finding, adaptive=True
    )
    try:
        printed = unit_text(options)
    except UnitValueError:
        return
    read = systemd_unit.settings(printed)
    keys = [key for _, key, _ in read]
    assert keys.count("Environment") <= 1
    assert [key for key in keys if key != "Environment"] == [
        "Description", "Type", "ExecStart", "Restart", "RestartSec", "KillMode",
        "TimeoutStopSec", "WantedBy",
    ]  # fmt: skip
    argv = systemd_unit.exec_argv(dict((k, v) for _, k, v in read)["ExecStart"])
    door = ["--front-door", front_door] if front_door is not None else []
    assert argv == [
        *vramtop_command(), *door, "guard", "--demo", "--on-finding", on_finding, "--adaptive",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "on_finding",
    [
        'curl -H "Authorization: Bearer sk-abc123" https://hooks.example/x',
        "notify.sh --token abc123",
        "curl https://me:hunter2@hooks.example/x",
        "curl https://hooks.example/x?api_key=abc123",
    ],
)
def test_a_key_written_in_on_finding_is_not_put_in_a_unit_file(
    tmp_path: Path, on_finding: str
) -> None:
    done = printed_here(
        "guard", "--demo", "--on-finding", on_finding, "--print-unit", home=tmp_path
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert "--on-finding carries a key" in done.stderr
    assert "abc123" not in done.stderr and "hunter2" not in done.stderr


def test_a_key_named_by_a_variable_is_put_in_the_unit_as_written(tmp_path: Path) -> None:
    # The guard runs the command without a shell: here a shell of its own reads the variable.
    on_finding = """sh -c 'curl -H "Authorization: Bearer ${HOOK_TOKEN}" https://hooks.example/x'"""
    done = printed_here(
        "guard", "--demo", "--on-finding", on_finding, "--print-unit", home=tmp_path
    )
    assert done.returncode == 0, done.stderr
    argv = systemd_unit.exec_argv(unit_settings(done.stdout)["ExecStart"])
    assert argv[-1] == on_finding


def test_the_units_command_is_read_by_systemd_as_the_words_given(tmp_path: Path) -> None:
    """`$` and `%` reach the guard as typed (not the service's $HOME, not a specifier), and
    quotes, backslashes and spaces stay inside their word."""
    on_finding = 'notify-send "$HOME" %h \\o/ ${USER} 100%'
    done = printed_here(
        "guard", "--demo", "--on-finding", on_finding, "--print-unit", home=tmp_path
    )
    assert done.returncode == 0, done.stderr
    argv = systemd_unit.exec_argv(unit_settings(done.stdout)["ExecStart"])
    assert argv[-4:] == ["guard", "--demo", "--on-finding", on_finding]


def test_the_units_command_prints_the_same_unit(tmp_path: Path) -> None:
    """The unit runs the guard as it was asked for, top-level options and the directory of
    its profile included: its own command line, run as systemd runs it (in the home
    directory, with the unit's variables and no others of this shell: not this test's
    PYTHONPATH), given --print-unit, prints the same unit."""
    home = tmp_path / "a home with spaces, $dollars and 100%"
    saved_profile(home, "work")
    key = {"VRAMTOP_TEST_KEY_NAME": "not-shown"}
    done = vramtop(
        "--no-windows", "--api-key-env", "VRAMTOP_TEST_KEY_NAME", "guard", "--profile", "work",
        "--notify", "terminal", "--settle", "0.1234567", "--interval", "2.5", "--print-unit",
        home=home, env=key,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    service = unit_settings(done.stdout)
    variables = systemd_unit.environment(service["Environment"])
    assert variables["VRAMTOP_HOME"] == str(home)
    argv = systemd_unit.exec_argv(service["ExecStart"])
    assert argv[:3] == [sys.executable, "-m", "vramtop"]
    assert argv[3:] == [
        "--no-windows", "--api-key-env", "VRAMTOP_TEST_KEY_NAME", "guard", "--profile",
        "work", "--notify", "terminal", "--settle", "0.1234567", "--interval", "2.5",
    ]  # fmt: skip
    service_env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"], **variables, **key}
    again = subprocess.run(
        [*argv, "--print-unit"],
        capture_output=True,
        text=True,
        env=service_env,
        cwd=tmp_path,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == done.stdout


@pytest.mark.parametrize(
    ("before", "args"),
    [
        ([], ["--profile", "nosuch"]),
        ([], ["--profile", "a b"]),
        ([], ["--profile", "../work"]),
        ([], ["--demo", "--notify", "bogus"]),
        ([], ["--demo", "--notify", ","]),
        ([], ["--demo", "--on-finding", ""]),
        ([], ["--demo", "--on-finding", '"unbalanced']),
        ([], ["--demo", "--settle", "0"]),
        ([], ["--demo", "--interval", "0"]),
        ([], ["--demo", "--profile", "work"]),
        (["--api-key-env", "VRAMTOP_TEST_UNSET_NAME"], ["--profile", "work"]),
        (["--front-door", "off"], ["--profile", "work"]),
        ([], []),
    ],
)
def test_print_unit_refuses_what_the_guard_refuses_in_the_same_words(
    tmp_path: Path, before: list[str], args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`before`: top-level options (before the command). Each refusal comes from the options'
    checks, before the guard starts anything: run in this process, as `main` is called."""
    saved_profile(tmp_path, "work")
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path))
    code, _, guard_err = run_apart([*before, "guard", *args])
    unit = run_apart([*before, "guard", *args, "--print-unit"])
    assert code == 2 and "Traceback" not in guard_err, guard_err
    assert unit == (2, "", guard_err)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_the_printed_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    home = tmp_path / "home $HOME 100%"
    on_finding = "notify-send \"$HOME\" %h \\\\o/ ${USER} 100% 'q' ;"
    done = vramtop("guard", "--demo", "--on-finding", on_finding, "--print-unit", home=home)
    assert done.returncode == 0, done.stderr
    unit = tmp_path / "vramtop-guard.service"
    unit.write_text(done.stdout)
    checked = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "debug"},
    )
    assert checked.returncode == 0, checked.stderr
    # The unit as systemd read it (its debug dump, where this systemd prints one): the
    # guard's words, before the service's variables are put in (`$$` then stands for `$`).
    dumped = [
        line.split("Command Line:", 1)[1]
        for line in checked.stderr.splitlines()
        if "Command Line:" in line
    ]
    if dumped:
        argv = [systemd_unit.variables(w) for w in shlex.split(dumped[0])]
        assert argv[-4:] == ["guard", "--demo", "--on-finding", on_finding]
        assert f"Environment: VRAMTOP_HOME={home}" in checked.stderr
    # The check can fail: a unit whose command does not exist does not pass.
    unit.write_text(done.stdout.replace("ExecStart=/", "ExecStart=/nonexistent/"))
    broken = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert broken.returncode != 0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--demo", "--settle", "-5"], "--settle must be between 0 and 86400"),
        (["--demo", "--notify", "pager"], "unknown notification 'pager'"),
        (["--demo", "--auto-remedy", "always"], "invalid choice"),
        (["--url", "http://127.0.0.1:9", "guard"], "--url watches a server it cannot act on"),
        (["--card", "spark"], "--card picks a simulated machine"),
        (["--wsl"], "--wsl only applies to the simulated machine"),
        (["--profile", "missing"], "missing"),
        ([], "no profile to guard"),
    ],
)
def test_bad_input_is_refused_in_words_with_exit_2(
    tmp_path: Path, args: list[str], words: str
) -> None:
    # Top-level options come before the command (where the command is named last).
    words_given = args if args[-1:] == ["guard"] else ["guard", *args]
    done = vramtop(*words_given, home=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert words in done.stderr
    assert "Traceback" not in done.stderr


def test_the_profiles_guard_fields_apply_and_the_command_line_wins() -> None:
    import pydantic

    from vramtop.commands.guard import GuardOptions
    from vramtop.commands.shared_options import Target
    from vramtop.config import Profile
    from vramtop.profile_file import profile_to_toml

    profile = Profile(
        name="work",
        argv=["vllm", "serve", "m"],
        notify=["toast"],
        auto_remedy="between-turns",
        adaptive=True,
        settle_s=60.0,
    )
    plain = GuardOptions(target=Target(profile="work")).settings(profile)
    assert (plain.notify, plain.auto_remedy, plain.adaptive, plain.settle_s) == (
        ("toast",),
        True,
        True,
        60.0,
    )
    given = GuardOptions(
        target=Target(profile="work"), notify=("terminal",), auto_remedy="off", settle_s=30.0
    )
    over = given.settings(profile)
    assert (over.notify, over.auto_remedy, over.adaptive, over.settle_s) == (
        ("terminal",),
        False,
        True,
        30.0,
    )
    # Written back, a profile keeps the guard's fields it set and gains none it did not.
    assert 'auto_remedy = "between-turns"' in profile_to_toml(profile)
    bare = Profile(name="bare", argv=["vllm", "serve", "m"])
    assert "auto_remedy" not in profile_to_toml(bare) and "settle_s" not in profile_to_toml(bare)
    with pytest.raises(pydantic.ValidationError):
        Profile(name="bad", argv=["vllm"], auto_remedy="always")  # type: ignore[arg-type]
    with pytest.raises(pydantic.ValidationError):
        Profile(name="bad", argv=["vllm"], settle_s=0)


def test_one_guard_per_profile_and_a_failed_start_leaves_it_watching(tmp_path: Path) -> None:
    profiles = tmp_path / "config" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "broken.toml").write_text(
        'name = "broken"\nargv = ["/nonexistent/vllm", "serve", "m"]\nport = 9\n'
    )
    env = {**os.environ, "VRAMTOP_HOME": str(tmp_path)}
    first = subprocess.Popen(
        [sys.executable, "-m", "vramtop", "guard", "--profile", "broken", "--notify", "terminal"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert first.stderr is not None
        lines = []
        for line in first.stderr:
            lines.append(line)
            if "guarding profile broken" in line:
                break
        assert any("the server did not start" in line for line in lines), lines
        assert first.poll() is None  # it goes on watching
        second = vramtop("guard", "--profile", "broken", home=tmp_path)
        assert second.returncode == 2
        assert f"(pid {first.pid}) already acts for profile broken" in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(60)
    assert first.returncode == 0
