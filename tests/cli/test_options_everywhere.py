"""A top-level option is taken wherever a person would write it: before a subcommand's name or
after it, with the same meaning; one the subcommand does not act on is refused in both places
(exit 2), never passed over."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from vramtop.cli import build_parser, parse_args
from vramtop.commands.catalog import BY_NAME

# A value for each top-level option (none for a flag).
VALUES: dict[str, list[str]] = {
    "--demo": [],
    "--wsl": [],
    "--card": ["spark"],
    "--once": [],
    "--json": [],
    "--url": ["http://127.0.0.1:8001"],
    "--profile": ["p"],
    "--interval": ["2"],
    "--record": ["f.jsonl"],
    "--no-windows": [],
    "--api-key-env": ["KEY"],
    "--front-door": ["127.0.0.1:18123"],
}
# What a subcommand needs to parse at all.
POSITIONALS: dict[str, list[str]] = {
    "diagnose": ["s.jsonl"],
    "record": ["s.jsonl"],
    "replay": ["s.jsonl"],
    "import": ["serve.sh"],
    "lint": ["serve.sh"],
}


def _parsed(argv: list[str]) -> dict[str, object] | None:
    """The parsed options, or None where the command line is refused (exit 2)."""
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            return vars(parse_args(argv))
        except SystemExit as exc:
            assert exc.code == 2
            return None


def test_every_top_level_option_is_in_the_list() -> None:
    flags = {
        a.option_strings[0]
        for a in build_parser()._actions
        if a.option_strings and a.dest not in ("help", "version")
    }
    assert flags == set(VALUES)


def _subcommands() -> list[str]:
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(subs.choices)


@pytest.mark.parametrize("command", _subcommands())
def test_an_option_means_the_same_before_and_after_the_subcommand(command: str) -> None:
    rest = POSITIONALS.get(command, [])
    if command == "profile":
        pytest.skip("its own subcommands take no top-level option")
    for flag, value in VALUES.items():
        before = _parsed([flag, *value, command, *rest])
        after = _parsed([command, *rest, flag, *value])
        assert before == after, f"vramtop {command}: {flag} before and after its name differ"
        dest = flag.removeprefix("--").replace("-", "_")
        assert (before is not None) is (dest in BY_NAME[command].takes), (command, flag)


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["restart", "--demo", "--front-door", "127.0.0.1:18123"], "front_door", "127.0.0.1:18123"),
        (["relaunch", "--demo", "--front-door", "off", "--budget", "0.8"], "front_door", "off"),
        (["status", "--demo", "--card", "spark"], "card", "spark"),
        (["stop", "--demo", "--card", "r9700"], "card", "r9700"),
        (["events", "--demo", "--card", "spark"], "card", "spark"),
        (["attach", "--demo", "--card", "spark"], "card", "spark"),
        (["logs", "--demo", "--card", "spark"], "card", "spark"),
    ],
)
def test_the_issues_command_lines_are_taken(argv: list[str], dest: str, value: str) -> None:
    parsed = _parsed(argv)
    assert parsed is not None and parsed[dest] == value


def test_an_option_a_command_does_not_act_on_is_refused_by_name() -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exc:
        parse_args(["--json", "stop"])
    assert exc.value.code == 2
    assert "--json does not go with `vramtop stop`" in err.getvalue()
