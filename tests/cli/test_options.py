"""The command line read once into typed options: what the parser gives (before or after the
subcommand's name, or not at all) is what each command's options hold."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from vramtop.cli import build_parser
from vramtop.commands.calc_options import CalcOptions
from vramtop.commands.export import DEFAULT_LISTEN, ExportOptions
from vramtop.commands.monitor import MonitorOptions
from vramtop.commands.record import RecordOptions
from vramtop.commands.shared_options import Given, Target
from vramtop.commands.status import StatusOptions
from vramtop.commands.supervised import LaunchOptions


def test_a_shared_option_counts_before_or_after_the_subcommand() -> None:
    parser = build_parser()
    before = StatusOptions.from_args(parser.parse_args(["--demo", "--json", "status"]))
    after = StatusOptions.from_args(parser.parse_args(["status", "--demo", "--json"]))
    assert before == after == StatusOptions(target=Target(demo=True), json=True)
    plain = StatusOptions.from_args(parser.parse_args(["status"]))
    assert plain == StatusOptions(target=Target())


def test_the_target_holds_every_machine_option() -> None:
    args = build_parser().parse_args(
        ["--url", "http://box:8001", "--api-key-env", "KEY", "--no-windows", "--profile", "p"]
    )
    options = MonitorOptions.from_args(args)
    assert options.target == Target(
        profile="p", url="http://box:8001", api_key_env="KEY", windows=False
    )
    assert options.interval is None and options.record is None and not options.once


def test_a_suppressed_default_is_the_options_own() -> None:
    # export's --interval and --card default to nothing in the namespace (argparse.SUPPRESS).
    options = ExportOptions.from_args(build_parser().parse_args(["export", "--demo"]))
    assert options == ExportOptions(target=Target(demo=True))
    assert options.listen == DEFAULT_LISTEN and options.interval == 1.0
    card = ExportOptions.from_args(build_parser().parse_args(["export", "--card", "spark"]))
    assert card.target.card == "spark"


def test_each_commands_own_options_are_typed_values() -> None:
    parser = build_parser()
    record = RecordOptions.from_args(
        parser.parse_args(["--interval", "0.5", "record", "f.jsonl", "--duration", "3"])
    )
    assert record.file == Path("f.jsonl") and record.interval == 0.5 and record.duration == 3.0
    launch = LaunchOptions.from_args(parser.parse_args(["start", "--no-wait", "-q"]))
    assert launch.no_wait and launch.wait.quiet and launch.wait.timeout == 900.0
    calc = CalcOptions.from_args(parser.parse_args(["calc", "--util", "0.9", "--budget", "0.8"]))
    assert calc.budgets == (0.9, 0.8) and calc.max_num_batched_tokens == 8192 and not calc.json


def test_a_namespace_without_the_option_reads_its_default() -> None:
    # A namespace made by hand (a test, another caller) need not hold every option.
    assert Target.from_args(argparse.Namespace(url="http://x:1")) == Target(url="http://x:1")
    given = Given(argparse.Namespace())
    assert given.flag("demo") is False and given.text("url") is None and given.numbers("util") == ()


@pytest.mark.parametrize(
    ("value", "read"),
    [("yes", "flag"), (True, "number"), (1.5, "whole"), (3, "text"), ("f", "path")],
)
def test_an_option_of_the_wrong_type_is_a_bug_said_at_once(value: object, read: str) -> None:
    given = Given(argparse.Namespace(option=value))
    with pytest.raises(TypeError, match="option option"):
        getattr(given, read)("option")
