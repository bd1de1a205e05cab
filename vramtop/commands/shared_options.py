"""Top-level options a subcommand also accepts after its name, shared by the commands that take
them (the command line's entry point, vramtop/cli.py, is imported by no module of vramtop)."""

from __future__ import annotations

import argparse

from vramtop.commands.argtypes import server_url


def add_shared_options(parser: argparse.ArgumentParser, *names: str) -> None:
    """Let a subcommand accept top-level options after its name (`vramtop start --demo`).

    Defaults are suppressed so that a value given before the subcommand is not overwritten.
    `names` picks among: demo, wsl, json, profile, url.
    """
    known = {
        "demo": (("--demo",), {"action": "store_true", "help": "act on the simulated machine"}),
        "wsl": (("--wsl",), {"action": "store_true", "help": "with --demo: the WSL2 way"}),
        "json": (("--json",), {"action": "store_true", "help": "print JSON"}),
        "profile": (("--profile",), {"help": "the profile to use"}),
        "url": (("--url",), {"help": "the vLLM server's base URL", "type": server_url}),
    }
    for name in names or tuple(known):
        flags, kwargs = known[name]
        parser.add_argument(*flags, default=argparse.SUPPRESS, **kwargs)  # type: ignore[arg-type]
