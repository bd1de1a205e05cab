"""`python -m vramtop.frontdoor --listen HOST:PORT --upstream http://127.0.0.1:INTERNAL …`

The front door as a process of its own. Bad arguments (an address, a hold time, an unreadable
or shared token file) are a message and exit 2; an address it cannot listen on, exit 1.
SIGTERM (or Ctrl+C) stops it accepting, answers the requests still held, lets those in flight
finish for up to 10 s, and exits 0.
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
from vramtop.frontdoor import protocol
from vramtop.frontdoor.app import DoorSettings, make_app
from vramtop.outcomes import ExitCode


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
    p.add_argument("--stats-file", type=Path, metavar="PATH", help="the status JSON, each second")
    return p


def read_token(path: Path) -> str:
    """The token's text; ValueError says why the file cannot be used."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ValueError(f"cannot read the token file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"the token file {path} is not a regular file")
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
    runner = web.AppRunner(
        make_app(settings), access_log=None, shutdown_timeout=protocol.STOP_GRACE_S
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
    await runner.cleanup()


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
    settings = DoorSettings(
        upstream=args.upstream, hold_s=args.hold_s, token=token, stats_file=args.stats_file
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
