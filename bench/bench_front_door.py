"""What the front door costs, measured against the same server direct, in one run: the
latency it adds per request and per streamed chunk, tokens/s through it ÷ direct, and its
own CPU per 1,000 chunks.

- per request: small requests (`GET /v1/models`), door and direct alternately, each side on
  a keep-alive connection of its own; the figure is door's quantile − direct's.
- per chunk: one stream direct and one through the door, the same prompt sent at the same
  moment; vLLM decodes both in the same steps, so each chunk through the door is matched with
  the direct chunk of the same step (the nearest in time, within a third of a step), and the
  figure is the difference of their arrival times. Which one is sent first alternates.
- tokens/s: streams one at a time, door and direct alternately; a stream's decode speed is
  its text chunks after the first over their time.
- CPU: the door process's user+system seconds (psutil) over the streaming phases ÷ the
  chunks that went through it.

The clients are raw asyncio sockets in one event loop, so the reader adds little of its own.
Against the real vLLM (VRAMTOP_VLLM_PYTHON and VRAMTOP_TINY_MODEL, `.ci/setup-vllm`), or
`--sim`, the simulated server (whose two streams are not decoded in lockstep: its per-chunk
figure says little), or `--url`, a server already running.

    python -m bench.bench_front_door [--runs 3] [--sim] [--url URL]
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
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil

from tests.e2e.conftest import SERVED_NAME, free_port, vllm_argv, vllm_env
from vramtop.core.door_stats import percentile


@dataclass
class Stream:
    sent: float = 0.0
    events: list[float] = field(default_factory=list)  # arrival time of each text chunk


def _request(host: str, path: str, body: bytes | None, close: bool) -> bytes:
    lines = [f"{'POST' if body is not None else 'GET'} {path} HTTP/1.1", f"Host: {host}"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


class KeepAlive:
    """One keep-alive connection for small GETs whose answers carry a Content-Length."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, path: str) -> float:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        started = time.perf_counter()
        self.writer.write(_request(f"{self.host}:{self.port}", path, None, close=False))
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        await self.reader.readexactly(length)
        return time.perf_counter() - started

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()


def completion(prompt: str, max_tokens: int, model: str | None) -> bytes:
    return json.dumps(
        {
            **({"model": model} if model else {}),
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0,
            "seed": 1234,
            "ignore_eos": True,
            "stream": True,
        }
    ).encode()


async def stream(url: str, body: bytes, start: asyncio.Event | None = None) -> Stream:
    """One streamed completion; each text chunk timed as its bytes are read."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    reader, writer = await asyncio.open_connection(host, port)
    out = Stream()
    if start is not None:
        await start.wait()
    out.sent = time.perf_counter()
    writer.write(_request(f"{host}:{port}", "/v1/completions", body, close=True))
    tail = b""
    try:
        while data := await reader.read(65536):
            now = time.perf_counter()
            data = tail + data
            out.events.extend([now] * data.count(b"data: {"))
            # Six bytes cannot hold a whole `data: {`, so none is counted twice.
            tail = data[-6:]
    finally:
        writer.close()
    return out


def matched_gaps(door: list[float], direct: list[float], step: float) -> list[float]:
    """door − direct for each door chunk whose same-step direct chunk is within step/3."""
    out = []
    j = 0
    for t in door:
        while j + 1 < len(direct) and abs(direct[j + 1] - t) <= abs(direct[j] - t):
            j += 1
        if direct and abs(direct[j] - t) <= step / 3:
            out.append(t - direct[j])
    return out


def decode_tps(s: Stream) -> float | None:
    if len(s.events) < 2 or s.events[-1] <= s.events[0]:
        return None
    return (len(s.events) - 1) / (s.events[-1] - s.events[0])


def cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


@dataclass
class Round:
    small: dict[str, list[float]]
    chunk_gaps: list[float]
    tps: dict[str, list[float]]
    door_chunks: int
    door_cpu_s: float


async def one_round(
    args: argparse.Namespace, direct: str, door: str, proc: psutil.Process
) -> Round:
    small: dict[str, list[float]] = {"direct": [], "door": []}
    conns = {"direct": KeepAlive(direct), "door": KeepAlive(door)}
    for side in ("direct", "door"):  # a first request opens each connection
        await conns[side].get("/v1/models")
    for i in range(args.requests):
        order = ("direct", "door") if i % 2 == 0 else ("door", "direct")
        for side in order:
            small[side].append(await conns[side].get("/v1/models"))
    for c in conns.values():
        await c.close()

    cpu0, chunks = cpu_s(proc), 0
    gaps: list[float] = []
    for i in range(args.pairs):
        body = completion(
            f"pair {i} hello world the model server token memory", args.max_tokens, args.model
        )
        go = asyncio.Event()
        first, second = (direct, door) if i % 2 == 0 else (door, direct)
        tasks = [asyncio.create_task(stream(u, body, go)) for u in (first, second)]
        await asyncio.sleep(0.05)  # both connected; then sent in the same moment
        go.set()
        a, b = await asyncio.gather(*tasks)
        d, p = (a, b) if first == direct else (b, a)
        chunks += len(p.events)
        intervals = [y - x for x, y in zip(d.events, d.events[1:], strict=False) if y > x]
        step = statistics.median(intervals) if intervals else 0.0
        gaps += matched_gaps(p.events, d.events, step)

    tps: dict[str, list[float]] = {"direct": [], "door": []}
    for i in range(args.streams):
        order = (direct, door) if i % 2 == 0 else (door, direct)
        for url in order:
            s = await stream(url, completion(f"alone {i} hello world", args.max_tokens, args.model))
            if url == door:
                chunks += len(s.events)
            rate = decode_tps(s)
            if rate is not None:
                tps["door" if url == door else "direct"].append(rate)
    return Round(small, gaps, tps, chunks, cpu_s(proc) - cpu0)


def ms(value: float | None, sign: str = "") -> str:
    return "n/a" if value is None else f"{value * 1000:{sign}.3f}"


def report(rounds: list[Round], label: str) -> dict[str, float | None]:
    small = {side: [v for r in rounds for v in r.small[side]] for side in ("direct", "door")}
    gaps = [g for r in rounds for g in r.chunk_gaps]
    tps = {side: [v for r in rounds for v in r.tps[side]] for side in ("direct", "door")}
    chunks = sum(r.door_chunks for r in rounds)
    cpu = sum(r.door_cpu_s for r in rounds)

    def q(values: list[float], p: float) -> float | None:
        return percentile(values, p)

    def diff(p: float) -> float | None:
        a, b = q(small["door"], p), q(small["direct"], p)
        return None if a is None or b is None else a - b

    tps_direct = statistics.median(tps["direct"]) if tps["direct"] else None
    tps_door = statistics.median(tps["door"]) if tps["door"] else None
    figures = {
        "request_added_p50_s": diff(0.5),
        "request_added_p99_s": diff(0.99),
        "chunk_added_p50_s": q(gaps, 0.5),
        "chunk_added_p99_s": q(gaps, 0.99),
        "tokens_per_s_ratio": tps_door / tps_direct if tps_door and tps_direct else None,
        "door_cpu_s_per_1000_chunks": cpu / chunks * 1000 if chunks else None,
    }
    print(f"\n{label}: {len(small['door'])} requests a side, {len(gaps)} chunks matched")
    print(f"{'':26}{'direct':>10}{'door':>10}{'added':>10}  (ms)")
    for name, p in (("per request p50", 0.5), ("per request p99", 0.99)):
        a, b = q(small["direct"], p), q(small["door"], p)
        print(f"{name:26}{ms(a):>10}{ms(b):>10}{ms(diff(p), '+'):>10}")
    for name, p in (("per chunk p50", 0.5), ("per chunk p99", 0.99)):
        print(f"{name:26}{'':>10}{'':>10}{ms(q(gaps, p), '+'):>10}")
    ratio = figures["tokens_per_s_ratio"]
    print(
        f"{'decode tokens/s p50':26}{tps_direct or 0:>10.1f}{tps_door or 0:>10.1f}"
        f"{'' if ratio is None else f'{ratio:.3f}':>10}  (door ÷ direct)"
    )
    per_k = figures["door_cpu_s_per_1000_chunks"]
    print(
        f"door CPU: {cpu:.2f} s for {chunks} chunks = "
        f"{'n/a' if per_k is None else f'{per_k:.3f}'} s per 1,000 chunks"
    )
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


def spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )

    def end() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    atexit.register(end)
    return proc


def start_server(args: argparse.Namespace, home: Path) -> str:
    if args.url:
        return str(args.url).rstrip("/")
    port = free_port()
    if args.sim:
        from vramtop.sim.machine import SimMachine

        machine = SimMachine(home / "sim", startup_s=0.3).start()
        atexit.register(machine.stop)
        proc = spawn(machine.server_argv(port=port), machine.server_env(), home / "server.log")
    else:
        env = {**os.environ, **vllm_env("bench-front-door")}
        proc = spawn(vllm_argv(port), env, home / "server.log")
    url = f"http://127.0.0.1:{port}"
    wait_health(url, proc, 60 if args.sim else 600)
    return url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="rounds of every measurement")
    parser.add_argument("--requests", type=int, default=100, help="small requests a side a round")
    parser.add_argument("--pairs", type=int, default=6, help="paired streams a round")
    parser.add_argument("--streams", type=int, default=3, help="lone streams a side a round")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--sim", action="store_true", help="the simulated server, not vLLM")
    parser.add_argument("--url", help="a server already running (its /health answers)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
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
    door_port = free_port()
    argv = [sys.executable, "-m", "vramtop.frontdoor", "--listen", f"127.0.0.1:{door_port}"]
    door_proc = spawn([*argv, "--upstream", direct], dict(os.environ), home / "door.log")
    door = f"http://127.0.0.1:{door_port}"
    wait_health(door, door_proc, 60)
    proc = psutil.Process(door_proc.pid)
    kind = "simulated server" if args.sim else ("vLLM at " + direct if args.url else "real vLLM")
    print(f"front door vs direct, {kind}, {args.runs} round(s), {os.cpu_count()} CPU(s)")
    rounds: list[Round] = []
    for n in range(args.runs):
        rounds.append(asyncio.run(one_round(args, direct, door, proc)))
        report(rounds[-1:], f"round {n + 1}")
    figures = report(rounds, "all rounds")
    print("targets: added p50 ≤ 1 ms, p99 ≤ 5 ms, tokens/s ≥ 0.99 of direct")
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
