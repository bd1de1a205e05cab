"""`vramtop record FILE`: monitor without the console and write the session to FILE.

One sample per tick, the server's lifecycle as events (derived from its state), and each
finding as it opens and closes, so the file can be diagnosed and replayed later.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vramtop.commands.argtypes import finite_float
from vramtop.commands.catalog import summary
from vramtop.commands.errors import CommandError
from vramtop.commands.shared_options import Given, Target, add_shared_options
from vramtop.core.bounds import interval_problem
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.outcomes import ExitCode
from vramtop.session.live import LiveSession
from vramtop.session.writer import SessionWriter

if TYPE_CHECKING:
    from vramtop.machines.interface import FrameSource

DEFAULT_INTERVAL_S = 1.0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "record",
        help=summary("record"),
        description="Watch the GPU and the vLLM server without the console and write every "
        "sample, the server's starts and exits, and each finding to FILE (JSON Lines).",
    )
    parser.add_argument("file", type=Path, help="where to write the session")
    parser.add_argument(
        "--duration", type=finite_float, default=None, metavar="S", help="stop after S seconds"
    )
    parser.add_argument(
        "--force", action="store_true", help="replace FILE if it exists (default: refuse)"
    )
    add_shared_options(parser, "demo", "wsl", "url", "profile")


@dataclass(frozen=True)
class RecordOptions:
    """`vramtop record`'s options (see commands/shared_options.py)."""

    file: Path
    target: Target
    duration: float | None = None
    force: bool = False
    interval: float = DEFAULT_INTERVAL_S

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RecordOptions:
        given = Given(args)
        file = given.path("file")
        if file is None:
            raise TypeError("vramtop record: no FILE in the parsed arguments")
        return cls(
            file=file,
            target=Target.from_args(args),
            duration=given.number("duration"),
            force=given.flag("force"),
            interval=given.number("interval") or DEFAULT_INTERVAL_S,
        )


def record_loop(
    backend: FrameSource,
    writer: SessionWriter,
    *,
    session: LiveSession | None = None,
    interval_s: float = DEFAULT_INTERVAL_S,
    duration_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    log_lines: Callable[[int], list[str]] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> Diagnoser:
    """Tick, write, diagnose until `duration_s` has passed (or `should_stop()`), on the
    headless runner the guard and the exporter tick on too (machines/runner.py).

    `session`: the live session the backend's own ticks feed (a `MachineBackend`'s `session`), which
    the recording goes through so that the diagnosis runs once; without one (a ticking object
    that keeps none) a session is made here and fed each tick's sample. A tick that raises
    ends the recording with its error, as it did before the runner."""
    from vramtop.machines.headless_runner import Runner, TickNews

    observe = session is None
    live = LiveSession(log_lines=log_lines) if session is None else session
    live.record_to(writer)
    start = clock()
    done = False

    def on_tick(news: TickNews) -> None:
        nonlocal done
        if observe:
            live.observe(news.frame.sample)
        # The file cannot take more (a full disk): the recording has failed.
        failed = live.recording_error is not None
        done = failed or (duration_s is not None and clock() - start >= duration_s)

    runner = Runner(backend, interval_s=interval_s, clock=clock, sleep=sleep)
    try:
        runner.run(lambda: done or should_stop(), on_tick, max_failures=1)
    finally:
        live.record_to(None)
    return live.diagnoser


def run(args: argparse.Namespace) -> int:
    from vramtop.commands.common import backend_for, open_session_file

    options = RecordOptions.from_args(args)
    interval, file = options.interval, options.file
    problem = interval_problem(interval)
    if problem is not None:
        print(f"vramtop record: --interval {problem}", file=sys.stderr)
        return ExitCode.USAGE
    if options.duration is not None and options.duration <= 0:
        print(
            f"vramtop record: --duration must be more than 0 seconds (got {options.duration:g}); "
            "leave it out to record until Ctrl+C",
            file=sys.stderr,
        )
        return ExitCode.USAGE
    if options.target.wsl and not options.target.demo:
        print("vramtop record: --wsl only applies with --demo", file=sys.stderr)
        return ExitCode.USAGE
    if (file.exists() or file.is_symlink()) and not options.force:
        print(
            f"vramtop record: {file} already exists; nothing was recorded "
            "(choose another name, or --force to replace it)",
            file=sys.stderr,
        )
        return ExitCode.USAGE
    try:
        backend, owned = backend_for(options.target)
    except CommandError as exc:
        print(f"vramtop record: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    try:
        if backend.autostart:
            result = backend.start()
            if not result.ok:
                print(f"vramtop record: {result.message}", file=sys.stderr)
                return ExitCode.ERROR
        backend.run_housekeeping()  # crashes settled (and recorded) beside the ticks
        first = backend.tick(log_limit=0).sample
        try:
            writer = open_session_file(file, backend, first, replace=options.force)
        except OSError as exc:
            print(f"vramtop record: cannot write {file}: {exc}", file=sys.stderr)
            return ExitCode.USAGE
        with writer:
            writer.sample(first)
            print(f"recording to {file} (Ctrl+C to stop)", file=sys.stderr)
            try:
                diagnoser = record_loop(
                    backend,
                    writer,
                    session=backend.session,
                    interval_s=interval,
                    duration_s=options.duration,
                    log_lines=backend.log_lines,
                )
            except KeyboardInterrupt:
                return 0
        if writer.failed is not None:
            print(
                f"vramtop record: recording to {file} failed: {writer.failed}; "
                "the lines written before it stay readable",
                file=sys.stderr,
            )
            return ExitCode.ERROR
        for finding in diagnoser.all_findings():
            print(f"[{finding.severity}] {finding.kind}: {finding.summary}", file=sys.stderr)
        return 0
    finally:
        if owned:
            backend.close(stop_server=True)
