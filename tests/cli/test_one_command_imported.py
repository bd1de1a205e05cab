"""The command line imports only the module of the command typed: the others are named by
their summary in the catalog (vramtop/commands/catalog.py). Every `vramtop status` and
`vramtop stop` paid for importing all of them (most of a second of CPU on a small machine),
and so did every test that runs vramtop as a process."""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys

import pytest

from vramtop import cli
from vramtop.commands.catalog import BY_NAME, COMMANDS


def _choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_the_catalog_names_every_command_as_its_own_parser_does() -> None:
    """A command's line in `vramtop --help` is the same whether its module was imported."""
    assert cli.build_parser(()).format_help() == cli.build_parser().format_help()
    whole = _choices(cli.build_parser())
    assert list(whole) == [command.name for command in COMMANDS]


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_a_commands_help_is_the_same_from_the_parser_of_that_command_alone(name: str) -> None:
    alone = _choices(cli.build_parser((name,)))[name].format_help()
    assert alone == _choices(cli.build_parser())[name].format_help()
    assert "Docs: " in alone


@pytest.mark.parametrize(
    "argv",
    [
        ["stop", "--demo", "--card", "spark"],
        ["--card", "spark", "stop", "--demo"],
        ["status", "--json"],
        ["--demo", "--front-door", "127.0.0.1:18123", "restart"],
        ["calc", "--json", "--util", "0.85"],
        ["relaunch", "--demo", "--budget", "0.85"],
        ["--demo"],
        ["--once", "--json", "--url", "http://127.0.0.1:8001"],
    ],
)
def test_what_is_parsed_is_what_the_whole_parser_parses(argv: list[str]) -> None:
    lazy = cli.parse_args(argv)
    if lazy.command is None:
        assert vars(lazy) == {**vars(cli.build_parser().parse_args(argv)), "command": None}
    else:
        assert vars(lazy) == vars(cli.build_parser().parse_args(argv))


@pytest.mark.parametrize(
    "argv",
    [["stpo"], ["--card", "nope", "stop"], ["stop", "--bogus"], ["--bogus"], ["status", "x"]],
)
def test_a_refusal_is_worded_as_the_whole_parser_words_it(argv: list[str]) -> None:
    said = []
    for parse in (cli.parse_args, cli.build_parser().parse_args):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as ended:
            parse(argv)
        assert ended.value.code == 2
        said.append(err.getvalue())
    assert said[0] == said[1]


def test_only_the_typed_commands_module_is_imported() -> None:
    code = (
        "import sys\n"
        "from vramtop import cli\n"
        "cli.parse_args(sys.argv[1:])\n"
        "print(','.join(sorted(c.name for c in cli.COMMANDS if c.module in sys.modules)))\n"
    )
    for argv, imported in (
        (["status", "--demo"], "status"),
        (["--card", "spark", "stop", "--demo"], "stop"),
        (["--demo"], ""),
    ):
        out = subprocess.run(
            [sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == imported, argv
