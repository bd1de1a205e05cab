"""`vramtop guard`: the headless watcher. It samples and diagnoses as the console does, with
no screen, for hours: it sends the news (a finding opened or closed, each action), keeps the
profile's lasting timeline, and, where asked, relaunches on its own (`--auto-remedy`,
`--adaptive`; the policies are `vramtop/core/guard/`). One guard per profile (the guard lock;
a console holding the actor lock hands it over);
SIGTERM ends it with exit 0 and vLLM keeps running. `--print-unit` prints a systemd user unit.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from dataclasses import dataclass, replace
from types import FrameType
from typing import TYPE_CHECKING, Any

from vramtop.commands.argtypes import finite_float, interval_seconds
from vramtop.commands.errors import CommandError
from vramtop.commands.shared_options import Given, Target, add_shared_options
from vramtop.core.bounds import interval_problem
from vramtop.outcomes import ExitCode
from vramtop.sim.card import CARDS

if TYPE_CHECKING:
    from vramtop.config import Profile
    from vramtop.notify import Notifier
    from vramtop.supervisor.actor import Holder

DEFAULT_INTERVAL_S = 1.0
AUTO_REMEDY_CHOICES = ("off", "between-turns")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "guard",
        help="watch without a screen: notify, keep the timeline, relaunch on its own if asked",
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


@dataclass(frozen=True)
class GuardSettings:
    """What the guard does, the command line over the profile's fields."""

    notify: tuple[str, ...] | None
    on_finding: str | None
    auto_remedy: bool
    adaptive: bool
    settle_s: float

    @classmethod
    def of(cls, options: GuardOptions, profile: Profile | None) -> GuardSettings:
        notify = options.notify
        if notify is None and profile is not None and profile.notify is not None:
            notify = tuple(profile.notify)
        auto = options.auto_remedy or (profile.auto_remedy if profile else "off")
        adaptive = (
            options.adaptive if options.adaptive is not None else bool(profile and profile.adaptive)
        )
        settle = (
            options.settle_s
            if options.settle_s is not None
            else (profile.settle_s if profile else 300.0)
        )
        return cls(notify, options.on_finding, auto == "between-turns", adaptive, settle)


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
    from vramtop.commands.guard_watch import guard_loop, sim_speed

    if target.demo:
        try:  # the card named, or the one whose server runs: its profile is the one guarded
            target = replace(target, card=demo_card(target))
        except CommandError as exc:
            notifier.close()
            return _usage(str(exc))
    from vramtop.supervisor.actor import GUARD, NOBODY, ActorLock, guard_lock

    # One guard per profile: the guard lock is taken before anything starts (a world, an
    # agent); then the actor lock, which a console opened first hands over at its next tick.
    name = _profile_name(target, profile)
    lock = ActorLock(name, GUARD)
    only_guard = guard_lock(name)
    try:
        if not only_guard.try_acquire():
            notifier.close()
            holder = only_guard.holder() or NOBODY
            return _usage(
                f"a guard (pid {holder['pid']}) already acts for profile {name}: one "
                "guard per profile; this one leaves"
            )
        if not lock.wait_acquire(waiting=_waiting_for):
            notifier.close()
            holder = lock.holder() or NOBODY
            return _usage(
                f"a {holder['kind'] or 'vramtop'} (pid {holder['pid']}) acts for "
                f"profile {name} and did not hand over (an older vramtop?): close it, then "
                "start the guard again"
            )
        # On the simulated machine the samples are stamped in simulated seconds.
        speed = sim_speed()
        clock = (lambda: time.monotonic() * speed) if target.demo else None
        try:
            backend, _owned = backend_for(target, clock=clock)
        except CommandError as exc:
            notifier.close()
            return _usage(str(exc))
        speed = sim_speed()  # (the clock's) a simulated machine found running sets its own
        return guard_loop(backend, notifier, settings, options.interval, _stop_on_signals())
    finally:
        lock.release()
        only_guard.release()


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
    settings = GuardSettings.of(options, profile)
    notifier = _notifier(settings, wsl=_on_wsl(target))
    if isinstance(notifier, str):
        return notifier
    return profile, settings, notifier


def _print_unit(options: GuardOptions) -> int:
    """Print the systemd unit for this guard; nothing printed for a value it cannot hold."""
    from vramtop.commands.guard_unit import unit_text
    from vramtop.core.unit_words import UnitValueError

    try:
        text = unit_text(options)
    except UnitValueError as exc:
        return _usage(f"--print-unit: {exc}")
    print(text, end="")
    return ExitCode.OK


def _waiting_for(holder: Holder) -> None:
    print(
        f"vramtop guard: waiting for the {holder['kind'] or 'vramtop'} "
        f"(pid {holder['pid']}) to hand over",
        file=sys.stderr,
        flush=True,
    )


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


def _notifier(settings: GuardSettings, *, wsl: bool) -> Notifier | str:
    """The Notifier the settings ask for, or the reason it cannot be made (in words)."""
    from vramtop.notify import notifier_for

    def problem(words: str) -> None:
        print(f"vramtop guard: {words}", file=sys.stderr)

    try:
        return notifier_for(
            list(settings.notify) if settings.notify else None,
            on_finding=settings.on_finding,
            wsl=wsl,
            on_problem=problem,
        )
    except ValueError as exc:
        return str(exc)


def _stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT: the guard ends its loop, vLLM goes on."""
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop
