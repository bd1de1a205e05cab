"""What the commands that act on the supervised server share (start, stop, restart, relaunch,
status, logs, attach): finding the profile, building its Supervisor, printing the result."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

import psutil

from vramtop import config
from vramtop.commands.argtypes import positive_seconds
from vramtop.commands.errors import CommandError, ExitCode
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.settings import load_settings
from vramtop.supervisor.service import MemoryReleased, Supervisor
from vramtop.supervisor.stopping import memory_released_on

PLACEHOLDER = "default"


@dataclass
class Target:
    supervisor: Supervisor
    demo: bool
    placeholder: bool = False  # no profile: the stand-in for an adopted server (`default`)


def add_common(parser: argparse.ArgumentParser, *, json: bool = False) -> None:
    """--demo and --profile; --json only where the command prints JSON (status)."""
    from vramtop.commands.shared_options import add_shared_options

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


def run_launch(args: argparse.Namespace, action: str) -> int:
    """`vramtop start` / `vramtop restart`: the same call on the Supervisor, by name."""

    def act(args: argparse.Namespace) -> int:
        supervisor = target(args).supervisor
        with said_if_left_loading(supervisor, args):
            result = getattr(supervisor, action)(
                progress=progress_printer(args.quiet),
                wait_ready=not args.no_wait,
                timeout_s=args.timeout,
            )
        return finish(result)

    return run_guarded(act, args)


@contextmanager
def said_if_left_loading(supervisor: Supervisor, args: argparse.Namespace) -> Iterator[None]:
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
                demo = " --demo" if getattr(args, "demo", False) else ""
                print(
                    f"vramtop: interrupted; the server (pid {info.pid}) goes on loading: "
                    f"`vramtop status{demo}` follows it, `vramtop stop{demo}` ends it",
                    file=sys.stderr,
                )
        raise


def target(args: argparse.Namespace, without_profile: bool = False) -> Target:
    """The Supervisor the command acts on: the demo's, or the named (or default) profile's.

    `without_profile`: with no profile named and none configured, act on the server recorded
    under the name "default" (an adopted server needs no profile)."""
    if getattr(args, "demo", False):
        from vramtop.machines import demo_world

        try:
            machine = demo_world.ensure_demo_world(wsl=bool(getattr(args, "wsl", False)))
        except RuntimeError as exc:
            raise CommandError(f"the simulated machine did not start: {exc}") from None
        profile = demo_world.demo_profile(machine)
        return Target(
            Supervisor(profile, memory_released=demo_world.memory_released_check(machine)), True
        )
    name = getattr(args, "profile", None)
    placeholder = False
    try:
        profile = load_profile(name)
    except CommandError:
        if not without_profile or name is not None or _default_named():
            raise
        profile, placeholder = _placeholder_profile(), True
    return Target(Supervisor(profile, memory_released=nvml_memory_released()), False, placeholder)


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


def run_guarded(action: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run `action(args)`, turning a CommandError into one line on stderr."""
    try:
        return action(args)
    except CommandError as exc:
        print(f"vramtop: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
