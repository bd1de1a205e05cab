"""`vramtop profile list|show NAME|set-default NAME`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from vramtop import config, profiles
from vramtop.config import ConfigError
from vramtop.outcomes import ExitCode
from vramtop.settings import load_settings


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("profile", help="list, show or pick server profiles")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="the saved profiles (* marks the default)")
    show = actions.add_parser("show", help="a profile as TOML (secrets masked)")
    show.add_argument("name", nargs="?", help="default: the default profile")
    default = actions.add_parser("set-default", help="use this profile when none is named")
    default.add_argument("name")


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "list":
            default = load_settings().default_profile
            names = profiles.list_profiles()
            if not names:
                print("no profiles yet: run `vramtop import launch.sh`")
            for name in names:
                print(f"{'*' if name == default else ' '} {name}")
        elif args.action == "show":
            sys.stdout.write(config.profile_to_toml(profiles.load_profile(args.name), shown=True))
        else:
            profiles.set_default_profile(args.name)
            print(f"default profile: {args.name}")
    except ConfigError as exc:
        print(f"vramtop profile: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    return 0
