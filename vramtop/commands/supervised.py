"""What the commands that act on the supervised server share (start, stop, restart, relaunch,
status, logs, attach): finding the profile, building its Supervisor, printing the result."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import TypeVar

import psutil

from vramtop import config
from vramtop.commands.argtypes import positive_seconds
from vramtop.commands.common import (
    CARD_WITHOUT_DEMO,
    FRONT_DOOR_WITHOUT_DEMO,
    WSL_WITHOUT_DEMO,
    demo_card,
)
from vramtop.commands.errors import CommandError
from vramtop.commands.shared_options import Given, Target, add_shared_options
from vramtop.outcomes import ActionResult, ExitCode, ProgressCallback
from vramtop.settings import load_settings
from vramtop.supervisor.service import MemoryReleased, Supervisor
from vramtop.supervisor.stopping import memory_released_on

PLACEHOLDER = "default"
# A command's options (`run_guarded` hands them to its action).
Options = TypeVar("Options")


class Launch(StrEnum):
    """The two actions `run_launch` does: the same call on the Supervisor, by name."""

    START = "start"
    RESTART = "restart"


@dataclass
class Supervised:
    supervisor: Supervisor
    demo: bool
    placeholder: bool = False  # no profile: the stand-in for an adopted server (`default`)


@dataclass(frozen=True)
class WaitOptions:
    """What start, restart and relaunch share (`add_wait_options`)."""

    timeout: float = 900.0
    quiet: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> WaitOptions:
        given = Given(args)
        timeout = given.number("timeout")
        return cls(timeout=900.0 if timeout is None else timeout, quiet=given.flag("quiet"))


@dataclass(frozen=True)
class LaunchOptions:
    """`vramtop start`'s and `vramtop restart`'s options (see commands/shared_options.py)."""

    target: Target
    wait: WaitOptions
    no_wait: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LaunchOptions:
        return cls(
            target=Target.from_args(args),
            wait=WaitOptions.from_args(args),
            no_wait=Given(args).flag("no_wait"),
        )


def add_common(parser: argparse.ArgumentParser, *, json: bool = False) -> None:
    """--demo and --profile; --json only where the command prints JSON (status)."""
    add_shared_options(parser, "demo", "profile", *(("json",) if json else ()))


def add_wait_options(parser: argparse.ArgumentParser) -> None:
    """What start, restart and relaunch share: how long to wait for ready, and quiet."""
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=900,
        help="seconds to wait for the server to answer /health (default 900)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def add_launch_options(parser: argparse.ArgumentParser) -> None:
    """start and restart: the common options plus --no-wait and the wait options."""
    add_common(parser)
    parser.add_argument(
        "--no-wait", action="store_true", help="return once launched, without waiting for ready"
    )
    add_wait_options(parser)


def run_launch(args: argparse.Namespace, action: Launch) -> int:
    """`vramtop start` / `vramtop restart`: the same call on the Supervisor."""
    options = LaunchOptions.from_args(args)

    def act(options: LaunchOptions) -> int:
        supervisor = target(options.target).supervisor
        progress = progress_printer(options.wait.quiet)
        wait_ready, timeout_s = not options.no_wait, options.wait.timeout
        with said_if_left_loading(supervisor, demo=options.target.demo):
            match action:
                case Launch.START:
                    result = supervisor.start(
                        progress=progress, wait_ready=wait_ready, timeout_s=timeout_s
                    )
                case Launch.RESTART:
                    result = supervisor.restart(
                        progress=progress, wait_ready=wait_ready, timeout_s=timeout_s
                    )
        return finish(result)

    return run_guarded(act, options)


@contextmanager
def said_if_left_loading(supervisor: Supervisor, *, demo: bool) -> Iterator[None]:
    """Ctrl+C while a start waits for its server: the server is not stopped (it outlives
    vramtop), so say that it goes on loading, and how to follow or end it."""
    try:
        yield
    except KeyboardInterrupt:
        with suppress(Exception):  # the message is a courtesy: the interrupt goes on
            info = supervisor.status()
            # Launched, not only about to be: a Ctrl+C before the process exists ends the start.
            launched = info.pid is not None and psutil.pid_exists(info.pid)
            if launched and info.state.value in ("starting", "running"):
                shown = ""
                if demo:
                    from vramtop.machines import demo_world
                    from vramtop.sim.card import DEFAULT_CARD

                    card = demo_world.card_of_profile(supervisor.name) or DEFAULT_CARD
                    shown = " " + demo_world.demo_options(card)
                print(
                    f"vramtop: interrupted; the server (pid {info.pid}) goes on loading: "
                    f"`vramtop status{shown}` follows it, `vramtop stop{shown}` ends it",
                    file=sys.stderr,
                )
        raise


def target(chosen: Target, without_profile: bool = False) -> Supervised:
    """The Supervisor the command acts on: the demo's, or the named (or default) profile's.

    `without_profile`: with no profile named and none configured, act on the server recorded
    under the name "default" (an adopted server needs no profile)."""
    if chosen.demo:
        from vramtop.machines import demo_world

        card = demo_card(chosen)
        try:
            begun = demo_world.begin_demo_world(chosen.wsl, card)
            machine = demo_world.finish_demo_world(begun.machine)
        except RuntimeError as exc:
            raise CommandError(f"the simulated machine did not start: {exc}") from None
        if begun.unlike_asked is not None:
            print(f"vramtop: {begun.unlike_asked}", file=sys.stderr)
        profile = demo_world.demo_profile(machine, demo_world.demo_door(chosen.front_door, card))
        return Supervised(
            Supervisor(
                profile,
                memory_released=demo_world.memory_released_check(machine),
                options_of=partial(demo_world.profile_options, wsl=bool(chosen.wsl)),
            ),
            True,
        )
    if chosen.front_door is not None:
        raise CommandError(FRONT_DOOR_WITHOUT_DEMO)
    if chosen.card is not None:
        raise CommandError(CARD_WITHOUT_DEMO)
    if chosen.wsl:
        raise CommandError(WSL_WITHOUT_DEMO)
    name = chosen.profile
    placeholder = False
    try:
        profile = load_profile(name)
    except CommandError:
        if not without_profile or name is not None or _default_named():
            raise
        profile, placeholder = _placeholder_profile(), True
    from vramtop.machines import profile_options

    supervisor = Supervisor(
        profile, memory_released=nvml_memory_released(), options_of=profile_options
    )
    return Supervised(supervisor, False, placeholder)


def load_profile(name: str | None) -> config.Profile:
    """The named (or default) profile; what is missing or broken becomes a CommandError."""
    from vramtop import profiles

    try:
        return profiles.load_profile(name)
    except config.ConfigError as exc:
        raise CommandError(f"{exc} (or try --demo)") from None


def _default_named() -> bool:
    try:
        return load_settings().default_profile is not None
    except config.ConfigError:
        return True


def _placeholder_profile() -> config.Profile:
    """Stands for an adopted server when the user has no profile: its state file carries
    everything a stop, status or restart needs."""
    from vramtop.supervisor import state

    rec = state.load(PLACEHOLDER)
    argv = rec.argv if rec is not None and rec.argv else ["vllm", "serve"]
    return config.Profile(
        name=PLACEHOLDER,
        argv=argv,
        host=(rec.host if rec is not None and rec.host else "127.0.0.1"),
        port=(rec.port if rec is not None and rec.port else 8000),
    )


def nvml_memory_released() -> MemoryReleased:
    """The driver's view of the stopped pids; without a driver there is nothing to wait for."""
    from vramtop.sources.probes import configured_probe

    return memory_released_on(configured_probe())


def progress_printer(quiet: bool) -> ProgressCallback:
    def report(word: str) -> None:
        if not quiet:
            print(f"… {word}", file=sys.stderr, flush=True)

    return report


def finish(result: ActionResult) -> int:
    """Print the result: success on stdout, failure on stderr with `ExitCode.USAGE`."""
    if result.ok:
        print(result.message)
        return ExitCode.OK
    print(f"vramtop: {result.message}", file=sys.stderr)
    if result.detail:
        print(result.detail, file=sys.stderr)
    return ExitCode.USAGE


def run_guarded(action: Callable[[Options], int], options: Options) -> int:
    """Run `action(options)`, turning a CommandError into one line on stderr."""
    try:
        return action(options)
    except CommandError as exc:
        print(f"vramtop: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
