"""The options that shape the simulated machine (`--wsl`, `--card`; `stop --all`, which also
stops it) say so when given without `--demo`, in every command that takes them: exit 2 and
the words, never passed over (`vramtop stop --all` said "not running" of the default profile
while the demo served)."""

from __future__ import annotations

import pytest

from tests.support.cli_run import run_apart
from vramtop.commands.catalog import BY_NAME

POSITIONALS = {"record": ["s.jsonl"], "relaunch": ["--budget", "0.85"]}
TAKING = {
    flag: sorted(n for n, c in BY_NAME.items() if flag in c.takes) for flag in ("wsl", "card")
}


def _refused(argv: list[str]) -> str:
    code, out, err = run_apart(argv)
    assert code == 2, (argv, code, out, err)
    return err


@pytest.mark.parametrize("command", ["", *TAKING["wsl"]])
def test_wsl_without_demo_is_refused_in_every_command(command: str) -> None:
    argv = [command, *POSITIONALS.get(command, [])] if command else []
    err = _refused([*argv, "--wsl"])
    assert "--wsl only applies" in err and "--demo" in err, err


@pytest.mark.parametrize("command", ["", *TAKING["card"]])
def test_card_without_demo_is_refused_in_every_command(command: str) -> None:
    argv = [command, *POSITIONALS.get(command, [])] if command else []
    err = _refused([*argv, "--card", "spark"])
    assert "--card" in err and "--demo" in err, err


def test_stop_all_without_demo_is_refused() -> None:
    err = _refused(["stop", "--all"])
    assert "vramtop stop --demo --all" in err, err
