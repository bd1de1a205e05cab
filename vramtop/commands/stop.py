"""`vramtop stop`: end the server's whole process tree and wait until its memory is back."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

from vramtop.commands import supervised
from vramtop.commands.catalog import summary
from vramtop.commands.shared_options import Given, Target


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("stop", help=summary("stop"))
    supervised.add_common(p)
    p.add_argument("--all", action="store_true", help="with --demo: also stop the simulated GPU")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


@dataclass(frozen=True)
class StopOptions:
    """`vramtop stop`'s options (see commands/shared_options.py)."""

    target: Target
    all: bool = False
    quiet: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> StopOptions:
        given = Given(args)
        return cls(target=Target.from_args(args), all=given.flag("all"), quiet=given.flag("quiet"))


def run(args: argparse.Namespace) -> int:
    def act(options: StopOptions) -> int:
        card: str | None = None
        target = options.target
        if options.all and not target.demo:
            from vramtop.commands.errors import CommandError

            raise CommandError(
                "--all also stops the simulated GPU: use it with --demo (vramtop stop --demo --all)"
            )
        if target.demo:
            from vramtop.commands.common import demo_card
            from vramtop.machines import demo_world

            # Found before the stop: once stopped, its server no longer tells which it was.
            card = demo_card(options.target)
            machine = demo_world.demo_machine(card=card)
            if demo_world.nothing_left(machine, demo_world.demo_profile_name(card)):
                print("not running")
                return 0
            target = replace(target, card=card)
        t = supervised.target(target, without_profile=True)
        code = supervised.finish(
            t.supervisor.stop(progress=supervised.progress_printer(options.quiet))
        )
        if code == 0 and card is not None and options.all:
            from vramtop.machines import demo_world

            demo_world.stop_demo_world(card)
            print("simulated machine stopped")
        return code

    return supervised.run_guarded(act, StopOptions.from_args(args))
