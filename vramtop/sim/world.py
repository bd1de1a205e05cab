"""The simulated GPU as a daemon: `python -m vramtop.sim.world --socket PATH`.

It holds the ledger (see `ledger.py`) and answers one JSON line per request on a Unix socket:
  state                              the card, every process, the desktop, spills
  alloc {pid, name, bytes[, kind]}   take memory for a process (fails with free/total numbers)
  free {pid}                         release everything a process holds
  call {on}                          start or end a video call
  server_condition {pid[, decoding]} spilled bytes/fraction and the decode-rate factor
                                     (decoding: whether the server has requests running)
  shutdown                           stop the daemon
Simulated time is real time × `--speed`. Every tick it reaps allocations of processes that
have exited, as the driver does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socketserver
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from vramtop import locks
from vramtop.core.json_types import JsonValue
from vramtop.sim import scenario as scenarios
from vramtop.sim.card import CARDS, DEFAULT_CARD, MIB
from vramtop.sim.clock import ScaledClock, SimClock
from vramtop.sim.ledger import Ledger
from vramtop.sim.world_protocol import ALREADY_SERVED

TICK_S = 0.1


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a zombie holds no GPU memory)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # (a ZombieProcess too)
        return False
    except psutil.AccessDenied:  # another user's: it exists
        return True


class World:
    """The ledger behind a lock, with the clock that drives it."""

    def __init__(self, ledger: Ledger, speed: float = 1.0, clock: SimClock | None = None) -> None:
        self.ledger = ledger
        self.stopping = threading.Event()
        # Simulated time (a test passes a clock it moves itself).
        self.clock: SimClock = clock or ScaledClock(speed, self.stopping)
        self.speed = self.clock.speed
        self._lock = threading.Lock()
        self.last_request = time.monotonic()  # when a client last asked anything

    def now(self) -> float:
        return self.clock.now()

    def tick(self) -> None:
        with self._lock:
            for pid in list(self.ledger.allocations):
                if not pid_alive(pid):
                    self.ledger.free(pid)
            self.ledger.advance(self.now())

    def idle_for(self) -> float | None:
        """Seconds since the last request while nothing holds simulated memory for a server
        (no console reads it, no server runs on it); None while something uses it."""
        with self._lock:
            if any(self.ledger.state()["servers"]):
                return None
            return time.monotonic() - self.last_request

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        self.last_request = time.monotonic()
        with self._lock:
            self.ledger.advance(self.now())
            if op == "state":
                return {**self.ledger.state(), "speed": self.speed}
            if op == "alloc":
                pid, nbytes = int(request["pid"]), int(request["bytes"])
                name = str(request.get("name", f"pid {pid}"))
                answer = self.ledger.alloc(pid, name, nbytes, str(request.get("kind", "server")))
                self.ledger.advance(self.now())
                return answer
            if op == "free":
                return {"ok": True, "freed_bytes": self.ledger.free(int(request["pid"]))}
            if op == "call":
                self.ledger.set_call(bool(request["on"]))
                return {"ok": True, "call_on": self.ledger.call_on}
            if op == "server_condition":
                decoding = request.get("decoding")
                return {
                    **self.ledger.condition(
                        int(request["pid"]), None if decoding is None else bool(decoding)
                    )
                }
            if op == "ping":
                return {
                    "ok": True,
                    "t": self.ledger.t,
                    "speed": self.speed,
                    "scenario": self.ledger.scenario.name,
                }
            if op == "shutdown":
                self.stopping.set()
                return {"ok": True}
        return {"ok": False, "error": f"unknown op {op!r}"}

    def request(self, op: str, **fields: JsonValue) -> dict[str, Any]:
        """As `WorldClient.request`, without the socket: for a server in the same process."""
        return self.handle({"op": op, **fields})


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        for raw in self.rfile:
            try:
                request = json.loads(raw)
                if not isinstance(request, dict):
                    raise ValueError("request is not an object")
                answer = self.server.world.handle(request)
            except (ValueError, KeyError, TypeError) as exc:
                answer = {"ok": False, "error": f"bad request: {exc}"}
            self.wfile.write(json.dumps(answer).encode() + b"\n")
            self.wfile.flush()


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    world: World


def socket_lock_path(socket_path: Path) -> Path:
    return socket_path.with_name(socket_path.name + ".lock")


def serve(socket_path: Path, world: World, idle_exit_s: float = 0.0) -> None:
    """Serve `world` on `socket_path` until asked to stop (or, with `idle_exit_s`, once it
    has been unused that long)."""
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    server = _Server(str(socket_path), _Handler)
    server.world = world
    os.chmod(socket_path, 0o600)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        while not world.stopping.wait(TICK_S):
            world.tick()
            idle = world.idle_for() if idle_exit_s > 0 else None
            if idle is not None and idle > idle_exit_s:
                print(f"simulated GPU: unused for {idle:.0f} s, leaving", flush=True)
                break
    finally:
        server.shutdown()
        server.server_close()
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vramtop.sim.world", description=__doc__)
    parser.add_argument("--socket", required=True, type=Path, help="Unix socket to listen on")
    parser.add_argument("--scenario", default="manual", help="bundled name or a JSON file")
    parser.add_argument("--speed", type=float, default=1.0, help="simulated seconds per second")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--card", choices=sorted(CARDS), default=DEFAULT_CARD, help="which machine's GPU"
    )
    parser.add_argument("--total-mib", type=int, default=None, help="default: the card's")
    parser.add_argument(
        "--idle-exit",
        type=float,
        default=0.0,
        metavar="S",
        help="leave after S seconds with no request and no server on the card (0: never)",
    )
    args = parser.parse_args(argv)
    card = CARDS[args.card]
    try:
        scenario = scenarios.load(args.scenario)
    except ValueError as exc:
        parser.error(str(exc))
    if args.speed <= 0:
        parser.error("--speed must be positive")
    total = (args.total_mib or card.total_mib) * MIB
    world = World(Ledger(scenario, total, args.seed, card=card), args.speed)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: world.stopping.set())
    # One simulated GPU per socket: the lock is held for the daemon's life (the kernel drops
    # it when the process dies), so a second one started at the same moment leaves at once.
    args.socket.parent.mkdir(parents=True, exist_ok=True)
    lock = os.open(socket_lock_path(args.socket), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    if not locks.try_hold(lock):
        print(f"simulated GPU: {args.socket} is already served", flush=True)
        return ALREADY_SERVED
    try:
        serve(args.socket, world, idle_exit_s=args.idle_exit)
    except OSError as exc:
        print(f"simulated GPU: cannot listen on {args.socket}: {exc}", file=sys.stderr)
        return 1
    finally:
        os.close(lock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
