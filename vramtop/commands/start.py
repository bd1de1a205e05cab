"""`vramtop start`: launch the profile's server (or re-attach to the one already running)."""

from __future__ import annotations

import argparse

from vramtop.supervisor import cli_support


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("start", help="start the profile's vLLM server and wait until ready")
    cli_support.add_common(p)
    p.add_argument("--no-wait", action="store_true", help="return once launched")
    p.add_argument("--timeout", type=float, default=900, help="seconds to wait for ready")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def run(args: argparse.Namespace) -> int:
    def act(args: argparse.Namespace) -> int:
        t = cli_support.target(args)
        result = t.supervisor.start(
            progress=cli_support.progress_printer(args.quiet),  # type: ignore[arg-type]
            wait_ready=not args.no_wait,
            timeout_s=args.timeout,
        )
        return cli_support.finish(result)

    return cli_support.run_guarded(act, args)
