"""`vramtop lint [PROFILE|SCRIPT]`: warnings about exposure, remote code, the key, and headroom.

Exit 0: clean; 1: warnings; 2: the input cannot be used.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vramtop import profiles
from vramtop.commands.argtypes import finite_float
from vramtop.commands.catalog import summary
from vramtop.commands.import_ import read_config_defaults, read_script
from vramtop.commands.shared_options import Given
from vramtop.config import ConfigError
from vramtop.core.launch.launch_warnings import GIB, lint_launch
from vramtop.outcomes import ExitCode
from vramtop.settings import load_settings
from vramtop.supervisor.step_phases import model_on_slow_place

if TYPE_CHECKING:
    from vramtop.config import Profile

EXIT_WARNINGS = 1


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("lint", help=summary("lint"), description=__doc__)
    parser.add_argument(
        "target",
        nargs="?",
        help="a profile name, or a launch script's path (default: the default profile, as "
        "`vramtop` with no argument opens it)",
    )
    parser.add_argument(
        "--total-gib",
        type=finite_float,
        help="the card's total memory (default: read from the GPU; on unified memory, the "
        "shared pool)",
    )


def _card_total_bytes() -> tuple[int | None, str | None]:
    """The first GPU's total memory (the shared pool on unified memory), or why it is unknown."""
    from vramtop.sources.probes import configured_probe

    probe = configured_probe()
    try:
        reading = probe.read()
    finally:
        probe.close()
    if not reading.available:
        return None, reading.error or "no GPU found"
    return reading.devices[0].total_bytes, None


def _keys_in_file(profile: Profile) -> list[str]:
    """Where the profile's file holds a key beside its command line: the prelude (found as
    `import` finds one), a secret-named variable of `env` or one whose value is a key."""
    from vramtop.core import secrets
    from vramtop.core.launch.written_keys import prelude_writes_key

    places = ["prelude"] if profile.prelude and prelude_writes_key(profile.prelude) else []
    places += [
        f"env {name}"
        for name, value in profile.env.items()
        if value and secrets.holds_secret(name, value)
    ]
    return places


@dataclass(frozen=True)
class LintOptions:
    """`vramtop lint`'s options (see commands/shared_options.py): what to check (None: the
    default profile), and the card's total memory where it is given."""

    target: str | None = None
    total_gib: float | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LintOptions:
        given = Given(args)
        return cls(target=given.text("target"), total_gib=given.number("total_gib"))


def run(args: argparse.Namespace) -> int:
    options = LintOptions.from_args(args)
    name = options.target  # what the verdict names: the profile or the script
    target = Path(name or "")
    try:
        settings = load_settings()
        keys_in_file: list[str] = []
        if name is None:
            profile = profiles.load_profile(None)  # the default; says how to make one if none
            name = profile.name
            argv, key_env, key_in_script, defaults = profile.argv, profile.api_key_env, False, {}
            env, keys_in_file = profile.env, _keys_in_file(profile)
            cwd = profile.cwd
        elif target.suffix in (".sh", ".bash") or (target.is_file() and "/" in name):
            parsed = read_script(target)
            argv, key_env, key_in_script = parsed.argv, parsed.api_key_env, parsed.api_key_in_script
            defaults = read_config_defaults(parsed, target)
            env = parsed.env
            cwd = str(target.resolve().parent)
        else:
            profile = profiles.load_profile(name)
            argv, key_env, key_in_script, defaults = profile.argv, profile.api_key_env, False, {}
            env, keys_in_file = profile.env, _keys_in_file(profile)
            cwd = profile.cwd
    except ConfigError as exc:
        print(f"vramtop lint: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    total: int | None = int(options.total_gib * GIB) if options.total_gib else None
    if total is None:
        total, why = _card_total_bytes()
        if total is None:
            print(f"note: headroom not checked ({why}); pass --total-gib N", file=sys.stderr)
    findings = lint_launch(
        argv,
        api_key_env=key_env,
        api_key_in_script=key_in_script,
        defaults=defaults,
        total_bytes=total,
        min_headroom_gib=settings.min_desktop_headroom_gib,
        # What the server starts with: this environment, then the launch's own variables.
        env={**os.environ, **env},
        keys_in_file=keys_in_file,
        model_place=model_on_slow_place(argv, env, cwd),
    )
    for finding in findings:
        print(f"warning: {finding}")
    if not findings:
        print(f"{name}: no warnings")
    return EXIT_WARNINGS if findings else 0
