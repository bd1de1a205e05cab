"""`vramtop guard`'s command line: the headless watcher (vramtop/guard/). It samples and
diagnoses as the console does, with no screen, for hours: it sends the news (a finding opened
or closed, each action), keeps the profile's lasting timeline, and, where asked, relaunches on
its own (`--auto-remedy`, `--adaptive`; the policies are `vramtop/core/guard/`). One guard per
profile; SIGTERM ends it with exit 0 and vLLM keeps running. `--print-unit` prints a systemd
user unit. This module reads and checks the options, then calls the guard.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from vramtop.commands.argtypes import finite_float, interval_seconds
from vramtop.commands.catalog import summary
from vramtop.commands.errors import CommandError
from vramtop.commands.shared_options import Given, Target, add_shared_options
from vramtop.core.bounds import interval_problem
from vramtop.guard.choices import GuardSettings, guard_notifier
from vramtop.outcomes import ExitCode
from vramtop.sim.card import CARDS

if TYPE_CHECKING:
    from vramtop.config import Profile
    from vramtop.guard.unit import Words
    from vramtop.machines.machine_backend import MachineBackend
    from vramtop.notify import Notifier

DEFAULT_INTERVAL_S = 1.0
AUTO_REMEDY_CHOICES = ("off", "between-turns")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "guard",
        help=summary("guard"),
        description="Watch the profile's vLLM server for hours without the console: send a "
        "notification when a finding opens or closes and for every action, keep the "
        "profile's timeline, and (opt-in) relaunch with the collapse's remedy between agent "
        "turns, or step the budget down for each video call and back up after it. Starts the "
        "server when it is not running; SIGTERM stops the guard, not vLLM.",
    )
    add_shared_options(parser, "demo", "wsl", "profile")
    parser.add_argument(
        "--card",
        choices=tuple(CARDS),
        default=argparse.SUPPRESS,
        help="with --demo: which machine to simulate (as the console's --card)",
    )
    parser.add_argument(
        "--notify",
        metavar="LIST",
        default=None,
        help="where news goes, comma-separated: toast, notify-send, terminal (default: the "
        "profile's `notify`, else the machine's defaults)",
    )
    parser.add_argument(
        "--on-finding",
        metavar="CMD",
        default=None,
        help="also run CMD for each finding's news, its JSON on stdin",
    )
    parser.add_argument(
        "--auto-remedy",
        choices=AUTO_REMEDY_CHOICES,
        default=None,
        help="between-turns: relaunch with a collapse's remedy once it is open 10 s, at a "
        "moment with no request running (default: the profile's `auto_remedy`, else off)",
    )
    parser.add_argument(
        "--adaptive",
        action="store_true",
        default=None,
        help="step the budget down for each call and back up after it (the profile's budget "
        "is the one for outside calls)",
    )
    parser.add_argument(
        "--settle",
        type=finite_float,
        metavar="S",
        default=None,
        help="with --adaptive: seconds the desktop must stay settled before the budget steps "
        "back up (default: the profile's `settle_s`, else 300)",
    )
    parser.add_argument(
        "--interval",
        type=interval_seconds,
        default=argparse.SUPPRESS,
        help="seconds between samples (default 1.0; with --demo, simulated seconds)",
    )
    parser.add_argument(
        "--print-unit",
        action="store_true",
        help="print a systemd user unit that runs this guard, and exit",
    )


@dataclass(frozen=True)
class GuardOptions:
    """`vramtop guard`'s options (see commands/shared_options.py); None: the profile's."""

    target: Target
    notify: tuple[str, ...] | None = None
    on_finding: str | None = None
    auto_remedy: str | None = None
    adaptive: bool | None = None
    settle_s: float | None = None
    interval: float = DEFAULT_INTERVAL_S
    print_unit: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> GuardOptions:
        given = Given(args)
        notify = given.text("notify")
        return cls(
            target=Target.from_args(args),
            notify=tuple(n.strip() for n in notify.split(",") if n.strip())
            if notify is not None
            else None,
            on_finding=given.text("on_finding"),
            auto_remedy=given.text("auto_remedy"),
            adaptive=True if given.flag("adaptive") else None,
            settle_s=given.number("settle"),
            interval=given.number("interval") or DEFAULT_INTERVAL_S,
            print_unit=given.flag("print_unit"),
        )

    def settings(self, profile: Profile | None) -> GuardSettings:
        """What the guard does: these options over `profile`'s fields."""
        return GuardSettings.of(
            profile,
            notify=self.notify,
            on_finding=self.on_finding,
            auto_remedy=self.auto_remedy,
            adaptive=self.adaptive,
            settle_s=self.settle_s,
        )


def _usage(words: str) -> int:
    print(f"vramtop guard: {words}", file=sys.stderr)
    return ExitCode.USAGE


def run(args: argparse.Namespace) -> int:
    options = GuardOptions.from_args(args)
    target = options.target
    checked = _checked(options)
    if isinstance(checked, str):
        return _usage(checked)
    profile, settings, notifier = checked
    if options.print_unit:
        notifier.close()
        return _print_unit(options)
    from vramtop.commands.common import backend_for, demo_card
    from vramtop.guard.loop import run_guard

    if target.demo:
        try:  # the card named, or the one whose server runs: its profile is the one guarded
            target = replace(target, card=demo_card(target))
        except CommandError as exc:
            notifier.close()
            return _usage(str(exc))

    def backend(clock: Callable[[], float]) -> MachineBackend | str:
        try:
            return backend_for(target, clock=clock if target.demo else None)[0]
        except CommandError as exc:
            return str(exc)

    name = _profile_name(target, profile)
    return run_guard(name, backend, notifier, settings, options.interval, demo=target.demo)


def _checked(options: GuardOptions) -> tuple[Profile | None, GuardSettings, Notifier] | str:
    """Everything the guard checks before it starts, in words where one fails: its options,
    the profile (it exists, it can be read, its name), and the notifications (the senders
    named, `--on-finding`'s command). `--print-unit` runs the same checks: a unit is printed
    only for a guard that would start."""
    target = options.target
    problem = _options_problem(options)
    if problem is not None:
        return problem
    from vramtop.commands.common import live_target

    try:
        # A profile that cannot be read, or none: refused before anything starts.
        profile = None if target.demo else live_target(target).profile
    except CommandError as exc:
        return str(exc)
    if not target.demo and profile is None:
        return (
            "no profile to guard: name one with --profile, or import your launch script "
            "(vramtop import launch.sh); --demo guards the simulated machine"
        )
    settings = options.settings(profile)
    notifier = guard_notifier(settings, wsl=_on_wsl(target))
    if isinstance(notifier, str):
        return notifier
    return profile, settings, notifier


def _print_unit(options: GuardOptions) -> int:
    """Print the systemd unit for this guard; nothing printed for a value it cannot hold."""
    from vramtop.core.unit_words import UnitValueError

    try:
        text = unit_text(options)
    except UnitValueError as exc:
        return _usage(f"--print-unit: {exc}")
    print(text, end="")
    return ExitCode.OK


def unit_text(options: GuardOptions) -> str:
    """The systemd unit that runs the guard these options ask for (vramtop/guard/unit.py):
    its profile (or `--demo`, `--wsl`, `--card`) and every option given; those left out are
    the profile's, read when the unit starts."""
    from vramtop.guard.unit import unit_text as text

    return text(_asked(options), options.on_finding)


def _asked(options: GuardOptions) -> Words:
    """The guard's command line after `vramtop`, each word with the option it is for: the
    top-level options the guard reads, `guard`, then its own."""
    target = options.target
    words: Words = []

    def option(flag: str, value: str | None = None) -> None:
        words.append((flag, flag))
        if value is not None:
            words.append((flag, value))

    if not target.windows:
        option("--no-windows")
    if target.api_key_env is not None:
        option("--api-key-env", target.api_key_env)
    if target.front_door is not None:
        option("--front-door", target.front_door)
    words.append(("guard", "guard"))
    if target.demo:
        option("--demo")
        if target.wsl:
            option("--wsl")
        if target.card:
            option("--card", target.card)
    elif target.profile:
        option("--profile", target.profile)
    if options.notify is not None:
        option("--notify", ",".join(options.notify))
    if options.on_finding is not None:
        option("--on-finding", options.on_finding)
    if options.auto_remedy is not None:
        option("--auto-remedy", options.auto_remedy)
    if options.adaptive:
        option("--adaptive")
    if options.settle_s is not None:
        option("--settle", _number(options.settle_s))
    if options.interval != DEFAULT_INTERVAL_S:
        option("--interval", _number(options.interval))
    return words


def _number(value: float) -> str:
    """A number as the guard reads it back unchanged: short where that loses nothing."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _profile_name(target: Target, profile: Profile | None) -> str:
    """The profile the guard acts for: the named one, or the simulated machine's."""
    if profile is not None:
        return profile.name
    from vramtop.machines.demo_world import demo_profile_name
    from vramtop.sim.card import DEFAULT_CARD

    return demo_profile_name(target.card or DEFAULT_CARD)


def _options_problem(options: GuardOptions) -> str | None:
    target = options.target
    if target.demo and target.profile:
        return "--demo guards the simulated machine's own profile: leave out --profile"
    if target.url:
        return "--url watches a server it cannot act on: guard a profile (--profile NAME)"
    if target.wsl and not target.demo:
        return "--wsl only applies to the simulated machine: use it with --demo"
    if target.card and not target.demo:
        return "--card picks a simulated machine: use it with --demo"
    problem = interval_problem(options.interval)
    if problem is not None:
        return f"--interval {problem}"
    if options.settle_s is not None and not 0 < options.settle_s <= 86_400:
        return f"--settle must be between 0 and 86400 seconds (got {options.settle_s:g})"
    if options.notify == ():
        return "--notify needs at least one of toast, notify-send, terminal"
    return None


def _on_wsl(target: Target) -> bool:
    """Whether the machine guarded is WSL2, for the default notifications (a toast there):
    the simulated machine's `--wsl`, else the machine the guard runs on."""
    if target.demo:
        return target.wsl
    from vramtop.sources.host import is_wsl

    return is_wsl()
