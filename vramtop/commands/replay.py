"""`vramtop replay FILE [--speed X]`: play a recorded session through the console."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from vramtop.commands.argtypes import finite_float
from vramtop.outcomes import ExitCode


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="play a recorded session through the console",
        description="Play a session recorded with `vramtop record` (or the console's recording "
        "option) through the console, at a chosen speed, so a collapse can be looked at again "
        "and shown to someone. The findings are worked out again by the same diagnosis.",
    )
    parser.add_argument("file", type=Path, help="a session file (JSON Lines)")
    parser.add_argument(
        "--speed",
        type=finite_float,
        default=10.0,
        help="how many recorded seconds pass per second (default 10; 1 = real time)",
    )


def run(args: argparse.Namespace) -> int:
    from vramtop.machines.replay_backend import ReplayBackend
    from vramtop.session.reader import SessionError

    if args.speed <= 0:
        print("vramtop replay: --speed must be a positive number, e.g. 10", file=sys.stderr)
        return ExitCode.USAGE
    try:
        backend = ReplayBackend(args.file, speed=args.speed)
    except (SessionError, OSError) as exc:
        print(f"vramtop replay: cannot read {args.file}: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    from vramtop.tui.app import run_console

    return run_console(backend)
