"""`vramtop logs [-f] [-n N]`: the server's log (its stdout and stderr)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from vramtop.commands import supervised
from vramtop.commands.argtypes import count_or_zero
from vramtop.commands.catalog import summary
from vramtop.commands.errors import CommandError
from vramtop.commands.shared_options import Given, Target
from vramtop.core.secrets import mask_line


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("logs", help=summary("logs"))
    supervised.add_common(p)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    p.add_argument(
        "-n", "--lines", type=count_or_zero, default=50, help="how many lines (default 50)"
    )


@dataclass(frozen=True)
class LogsOptions:
    """`vramtop logs`'s options (see commands/shared_options.py)."""

    target: Target
    follow: bool = False
    lines: int = 50

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LogsOptions:
        given = Given(args)
        lines = given.whole("lines")
        return cls(
            target=Target.from_args(args),
            follow=given.flag("follow"),
            lines=50 if lines is None else lines,
        )


def run(args: argparse.Namespace) -> int:
    def act(options: LogsOptions) -> int:
        path: Path | None
        if options.target.demo:
            from vramtop.commands.common import demo_card
            from vramtop.machines import demo_world
            from vramtop.supervisor import state

            path = state.log_path(demo_world.demo_profile_name(demo_card(options.target)))
        else:
            path = supervised.target(options.target, without_profile=True).supervisor.log_path
        if path is None:
            raise CommandError(
                "this server was started outside vramtop and its output goes elsewhere (a "
                "terminal or a pipe); attach it with --log PATH to name the file it writes to"
            )
        if not path.exists():
            raise CommandError(f"no log yet ({path}); start the server first")
        for line in tail(path, options.lines):
            print(mask_line(line))  # the file is the server's; what vramtop shows is masked
        sys.stdout.flush()
        if options.follow:
            follow(path)
        return 0

    return supervised.run_guarded(act, LogsOptions.from_args(args))


# The most of the log's end `tail` reads, whatever -n asks: lines beyond are in the file.
MAX_TAIL_BYTES = 64 << 20


def tail(path: Path, count: int) -> list[str]:
    """The last `count` lines, from at most the last `MAX_TAIL_BYTES` of the file."""
    with path.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        most = min(size, MAX_TAIL_BYTES)
        block = min(most, max(count, 1) * 400 + 4096)
        while True:
            fh.seek(size - block)
            lines = fh.read(block).decode("utf-8", "replace").splitlines()
            if len(lines) > count or block == most:
                return lines[-count:] if count > 0 else []
            block = min(most, block * 4)


def follow(path: Path) -> None:
    from vramtop.sources.logtail import LogTail

    with LogTail(path) as reader:
        while reader.read_new():  # skip what was already printed
            pass
        while True:
            for line in reader.read_new():
                print(mask_line(line), flush=True)
            time.sleep(0.25)
