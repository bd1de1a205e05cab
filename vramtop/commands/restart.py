"""`vramtop restart`: stop and start the same server (the cure for a collapse)."""

from __future__ import annotations

import argparse

from vramtop.commands import supervised
from vramtop.commands.catalog import summary


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("restart", help=summary("restart"))
    supervised.add_launch_options(p)


def run(args: argparse.Namespace) -> int:
    return supervised.run_launch(args, supervised.Launch.RESTART)
