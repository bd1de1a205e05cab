"""The guard's default notifications follow the machine it guards: a toast on a real WSL2
machine (no `--demo`, so no `--wsl` to say so), the demo's own `--wsl` on the simulated one."""

from __future__ import annotations

from pathlib import Path

import pytest

import vramtop.notify as notify
from vramtop.cli import parse_args
from vramtop.commands import guard
from vramtop.notify import Notifier
from vramtop.outcomes import ExitCode
from vramtop.sources import host


@pytest.fixture
def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Notifier]:
    """The Notifier the guard builds, kept, and the guard sent away right after (no lock
    taken, no server started); stdout is no terminal, as under systemd."""
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path))
    profiles = tmp_path / "config" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "work.toml").write_text('name = "work"\nargv = ["vllm", "serve", "m"]\n')
    monkeypatch.setattr(notify, "stdout_writer", lambda: None)
    made: list[Notifier] = []
    real = notify.notifier_for

    def keeping(*args: object, **kwargs: object) -> Notifier:
        made.append(real(*args, **kwargs))  # type: ignore[arg-type]
        raise ValueError("stopped once its notifier was built")

    monkeypatch.setattr(notify, "notifier_for", keeping)
    return made


def guard_run(*words: str) -> int:
    return guard.run(parse_args(["guard", *words]))


def test_on_a_real_wsl2_machine_the_guard_sends_a_toast_by_default(
    built: list[Notifier], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host, "is_wsl", lambda: True)
    assert guard_run("--profile", "work") == ExitCode.USAGE
    (notifier,) = built
    assert notifier.names == ["toast"]
    assert notifier.reach == "toast (left out: no terminal on stdout)"


@pytest.mark.parametrize(
    ("words", "machine_is_wsl", "toast"),
    [
        (("--demo", "--wsl"), False, True),  # the simulated WSL2 machine, from anywhere
        (("--demo",), True, False),  # the simulated Linux machine, even run on WSL2
        (("--profile", "work"), False, False),  # a real Linux machine
    ],
)
def test_the_simulated_machine_follows_its_own_wsl_flag(
    built: list[Notifier],
    monkeypatch: pytest.MonkeyPatch,
    words: tuple[str, ...],
    machine_is_wsl: bool,
    toast: bool,
) -> None:
    monkeypatch.setattr(host, "is_wsl", lambda: machine_is_wsl)
    assert guard_run(*words) == ExitCode.USAGE
    (notifier,) = built
    assert ("toast" in notifier.names) is toast
