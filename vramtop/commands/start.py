"""`vramtop start`: launch the profile's server (or re-attach to the one already running)."""

from __future__ import annotations

import argparse

from vramtop.commands import supervised
from vramtop.commands.argtypes import front_door
from vramtop.commands.catalog import summary


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("start", help=summary("start"))
    supervised.add_launch_options(p)
    p.add_argument(
        "--front-door",
        type=front_door,
        metavar="ADDR",
        default=argparse.SUPPRESS,
        help="with --demo: where the front door listens (HOST:PORT; default: the demo's "
        "port), or off to serve without one",
    )


def run(args: argparse.Namespace) -> int:
    return supervised.run_launch(args, supervised.Launch.START)
