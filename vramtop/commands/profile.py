"""`vramtop profile list|show NAME|set-default NAME`."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from vramtop import profile_file, profiles
from vramtop.commands.catalog import summary
from vramtop.commands.shared_options import Given
from vramtop.config import ConfigError
from vramtop.outcomes import ExitCode
from vramtop.settings import load_settings


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("profile", help=summary("profile"))
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="the saved profiles (* marks the default)")
    show = actions.add_parser("show", help="a profile as TOML (secrets masked)")
    show.add_argument("name", nargs="?", help="default: the default profile")
    default = actions.add_parser("set-default", help="use this profile when none is named")
    default.add_argument("name")


@dataclass(frozen=True)
class ProfileOptions:
    """`vramtop profile`'s options (see commands/shared_options.py): the action (list, show,
    set-default) and the profile it names (None: the default one, for show)."""

    action: str
    name: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ProfileOptions:
        given = Given(args)
        return cls(action=given.text("action") or "list", name=given.text("name"))


def run(args: argparse.Namespace) -> int:
    options = ProfileOptions.from_args(args)
    try:
        if options.action == "list":
            default = load_settings().default_profile
            names = profiles.list_profiles()
            if not names:
                print("no profiles yet: run `vramtop import launch.sh`")
            for name in names:
                print(f"{'*' if name == default else ' '} {name}")
        elif options.action == "show":
            shown = profiles.load_profile(options.name)
            sys.stdout.write(profile_file.profile_to_toml(shown, shown=True))
        elif options.name is not None:  # set-default: argparse requires the name
            profiles.set_default_profile(options.name)
            print(f"default profile: {options.name}")
    except ConfigError as exc:
        print(f"vramtop profile: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    return 0
