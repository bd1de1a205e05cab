"""`vramtop start`: launch the profile's server (or re-attach to the one already running)."""

from __future__ import annotations

import argparse

from vramtop.commands import supervised


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("start", help="start the profile's vLLM server and wait until ready")
    supervised.add_launch_options(p)


def run(args: argparse.Namespace) -> int:
    return supervised.run_launch(args, supervised.Launch.START)
