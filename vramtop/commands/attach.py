"""`vramtop attach [--port 8000 | --pid N] [--log PATH]`: adopt a vLLM server something else
started (and, with --log, the file its output goes to)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

from vramtop.commands import supervised
from vramtop.commands.argtypes import pid, port
from vramtop.commands.catalog import summary
from vramtop.commands.errors import CommandError
from vramtop.commands.shared_options import Given, Target


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("attach", help=summary("attach"))
    supervised.add_common(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--port", type=port, help="the port it listens on (default 8000)")
    which.add_argument("--pid", type=pid, help="its process id")
    p.add_argument(
        "--log",
        type=Path,
        metavar="PATH",
        help="the file its output goes to (default: its stdout or stderr, when that is a file)",
    )


@dataclass(frozen=True)
class AttachOptions:
    """`vramtop attach`'s options (see commands/shared_options.py)."""

    target: Target
    port: int | None = None
    pid: int | None = None
    log: Path | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AttachOptions:
        given = Given(args)
        return cls(
            target=Target.from_args(args),
            port=given.whole("port"),
            pid=given.whole("pid"),
            log=given.path("log"),
        )


def run(args: argparse.Namespace) -> int:
    def act(options: AttachOptions) -> int:
        target = options.target
        if target.demo:
            from vramtop.commands.common import demo_card
            from vramtop.machines import demo_world

            card = demo_card(target)
            target = replace(target, card=card)
            if not demo_world.world_alive(demo_world.demo_machine(card=card)):
                # No simulated GPU, so no simulated server to adopt: starting the GPU only to
                # find nothing would leave it running, unused, for its idle timeout.
                raise CommandError(
                    "no simulated server is running to attach to "
                    f"(vramtop start {demo_world.demo_options(card)} starts one)"
                )
        t = supervised.target(target, without_profile=True)
        port = options.port
        if port is None and options.pid is None:
            # vLLM's own port: behind a front door (the demo's), the profile's port is the
            # door's, and its process no vLLM server.
            port = urlsplit(t.supervisor.scrape_url).port or t.supervisor.profile.port
        log = options.log
        if log is not None:
            log = log.expanduser().absolute()
            if not log.is_file():
                raise CommandError(f"--log {options.log}: no such file")
        from vramtop.machines.demo_world import profile_options

        # A server found of another profile is named as a person would: a demo's by its machine.
        options_of = partial(profile_options, wsl=bool(target.wsl))
        return supervised.finish(
            t.supervisor.attach(port=port, pid=options.pid, log=log, options_of=options_of)
        )

    return supervised.run_guarded(act, AttachOptions.from_args(args))
