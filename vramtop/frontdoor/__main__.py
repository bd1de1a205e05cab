"""`python -m vramtop.frontdoor --listen HOST:PORT --upstream http://127.0.0.1:INTERNAL …`

The front door as a process of its own. Bad arguments (an address, a hold time, an unreadable
or shared token file, a stats file it did not write) are a message and exit 2; an address it
cannot listen on, exit 1. SIGTERM (or Ctrl+C) stops it accepting, answers the requests still
held, lets those in flight finish for up to `--stop-grace-s` (10 s), cuts what is left then,
and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import signal
import stat
import sys
from pathlib import Path

from aiohttp import web

from vramtop import files
from vramtop.frontdoor import protocol, stats_file
from vramtop.frontdoor.web_app import DoorSettings, cut_at, make_app
from vramtop.frontdoor.wire import DoorRunner
from vramtop.outcomes import ExitCode

# After the stop's deadline, the time the requests cut then have to end (their 503 written,
# their connections closed) before aiohttp stops waiting for them.
_LAST_WORDS_S = 2.0
# `0`: a hold lets every request in flight finish instead of sending the unanswered
# generations again (the door before replay; `bench/bench_guard_step.py` measures both).
REPLAY_ENV = "VRAMTOP_DOOR_REPLAY"


def _listen(text: str) -> tuple[str, int]:
    try:
        return protocol.parse_listen(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _upstream(text: str) -> str:
    try:
        return protocol.parse_upstream(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the hold time is more than 0 seconds")
    return value


def _grace(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the grace is 0 seconds or more")
    return value


def _mib(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of MiB") from None
    if not math.isfinite(value) or value < 0 or value > 1024 * 1024:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of MiB, from 0 to 1048576")
    return int(value * 1024 * 1024)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m vramtop.frontdoor",
        description="vramtop's front door: forwards every route to vLLM and holds requests "
        "while vLLM restarts.",
    )
    p.add_argument("--listen", type=_listen, required=True, metavar="HOST:PORT")
    p.add_argument(
        "--upstream",
        type=_upstream,
        metavar="URL",
        help="vLLM's internal address, http://127.0.0.1:PORT (absent: hold until a release)",
    )
    p.add_argument(
        "--hold-s",
        type=_seconds,
        default=protocol.DEFAULT_HOLD_S,
        metavar="S",
        help="how long a held request waits before its 503 (default 600)",
    )
    p.add_argument("--token-file", type=Path, metavar="PATH", help="the control routes' token")
    p.add_argument(
        "--stats-file",
        type=Path,
        metavar="PATH",
        help="the status JSON, each second (a new file, or one the door wrote before)",
    )
    p.add_argument(
        "--max-body-mib",
        type=_mib,
        default=protocol.MAX_BODY_BYTES,
        metavar="MIB",
        help="the largest request body forwarded; a larger one is a 413 (default 256)",
    )
    p.add_argument(
        "--body-memory-mib",
        type=_mib,
        default=protocol.BODY_MEMORY_BYTES,
        metavar="MIB",
        help="request bodies kept in memory, all together; the others stream (default 64)",
    )
    p.add_argument(
        "--stop-grace-s",
        type=_grace,
        default=protocol.STOP_GRACE_S,
        metavar="S",
        help="after SIGTERM, how long requests in flight may finish before they are cut "
        f"(default {protocol.STOP_GRACE_S:g})",
    )
    return p


def read_token(path: Path) -> str:
    """The token's text; ValueError says why the file cannot be used."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ValueError(f"cannot read the token file {path}: {exc.strerror}") from None
    info = os.fstat(fd)  # judged before it is wrapped: a directory's would fail to wrap
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ValueError(f"the token file {path} is not a regular file")
    with os.fdopen(fd, "rb") as f:
        if info.st_mode & 0o077:
            raise ValueError(
                f"the token file {path} can be read by other users; make it 0600 (chmod 600)"
            )
        problem = files.owner_problem(path, info)  # another user's: a token they chose
        if problem is not None:
            raise ValueError(problem)
        token = f.read(4096).decode(errors="replace").strip()
    if not token:
        raise ValueError(f"the token file {path} is empty")
    return token


async def serve(host: str, port: int, settings: DoorSettings) -> None:
    app = make_app(settings)
    runner = DoorRunner(
        app, access_log=None, shutdown_timeout=settings.stop_grace_s + _LAST_WORDS_S
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        await runner.cleanup()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"vramtop front door listening on {host}:{port}, forwarding to "
        f"{settings.upstream or '(none yet: holding)'}",
        flush=True,
    )
    await stop.wait()
    # One deadline for every request under way: aiohttp's own wait (twice its timeout, the
    # second time for handlers it could not cancel) is cut short by it.
    deadline = asyncio.create_task(cut_at(app, settings.stop_grace_s))
    try:
        await runner.cleanup()
    finally:
        deadline.cancel()


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    token = None
    if args.token_file is not None:
        try:
            token = read_token(args.token_file)
        except ValueError as exc:
            print(f"vramtop front door: {exc}", file=sys.stderr)
            return ExitCode.USAGE
    if args.stats_file is not None and (why := stats_file.problem(args.stats_file)):
        print(f"vramtop front door: {why}", file=sys.stderr)
        return ExitCode.USAGE
    replay = os.environ.get(REPLAY_ENV, "1")
    if replay not in ("0", "1"):
        print(f"vramtop front door: {REPLAY_ENV}={replay!r}: set it to 1 or 0", file=sys.stderr)
        return ExitCode.USAGE
    settings = DoorSettings(
        upstream=args.upstream,
        hold_s=args.hold_s,
        token=token,
        stats_file=args.stats_file,
        max_body_bytes=args.max_body_mib,
        body_memory_bytes=args.body_memory_mib,
        stop_grace_s=args.stop_grace_s,
        replay=replay == "1",
    )
    host, port = args.listen
    try:
        asyncio.run(serve(host, port, settings))
    except OSError as exc:
        print(f"vramtop front door: {exc.strerror or exc}", file=sys.stderr)
        return ExitCode.ERROR
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
