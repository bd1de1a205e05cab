"""`vramtop stop`: end the server's whole process tree and wait until its memory is back."""

from __future__ import annotations

import argparse

from vramtop.commands import supervised


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("stop", help="stop the server (every process of it)")
    supervised.add_common(p)
    p.add_argument("--all", action="store_true", help="with --demo: also stop the simulated GPU")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def run(args: argparse.Namespace) -> int:
    def act(args: argparse.Namespace) -> int:
        if getattr(args, "demo", False):
            from vramtop.machines import demo_world

            if not demo_world.world_alive(demo_world.demo_machine()):
                print("not running")
                return 0
        t = supervised.target(args, without_profile=True)
        code = supervised.finish(
            t.supervisor.stop(progress=supervised.progress_printer(args.quiet))
        )
        if code == 0 and t.demo and args.all:
            from vramtop.machines import demo_world

            demo_world.stop_demo_world()
            print("simulated machine stopped")
        return code

    return supervised.run_guarded(act, args)
