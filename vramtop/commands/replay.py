"""`vramtop replay FILE [--speed X]`: play a recorded session through the console."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from vramtop.commands.argtypes import finite_float
from vramtop.commands.catalog import summary
from vramtop.commands.shared_options import Given
from vramtop.outcomes import ExitCode

# Recorded seconds per second, unless --speed says otherwise.
DEFAULT_SPEED = 10.0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "replay",
        help=summary("replay"),
        description="Play a session recorded with `vramtop record` (or the console's recording "
        "option) through the console, at a chosen speed, so a collapse can be looked at again "
        "and shown to someone. The findings are worked out again by the same diagnosis.",
    )
    parser.add_argument("file", type=Path, help="a session file (JSON Lines)")
    parser.add_argument(
        "--speed",
        type=finite_float,
        default=DEFAULT_SPEED,
        help="how many recorded seconds pass per second (default 10; 1 = real time)",
    )


@dataclass(frozen=True)
class ReplayOptions:
    """`vramtop replay`'s options (see commands/shared_options.py)."""

    file: Path
    speed: float = DEFAULT_SPEED

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReplayOptions:
        given = Given(args)
        file, speed = given.path("file"), given.number("speed")
        if file is None:
            raise TypeError("vramtop replay: no FILE in the parsed arguments")
        return cls(file=file, speed=DEFAULT_SPEED if speed is None else speed)


def run(args: argparse.Namespace) -> int:
    from vramtop.machines.replay_backend import ReplayBackend
    from vramtop.session.session_reader import SessionError

    options = ReplayOptions.from_args(args)
    if options.speed <= 0:
        print("vramtop replay: --speed must be a positive number, e.g. 10", file=sys.stderr)
        return ExitCode.USAGE
    try:
        backend = ReplayBackend(options.file, speed=options.speed)
    except (SessionError, OSError) as exc:
        print(f"vramtop replay: cannot read {options.file}: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    from vramtop.tui.app import run_console

    return run_console(backend)
