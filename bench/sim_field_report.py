"""Replays the field report on the simulated machine and prints the decode rates it produces.

    python -m bench.sim_field_report [--speed 20] [--budgets 0.93,0.85] [--reads 300]

For each budget (0.93, 0.85): tokens/s (simulated time) before a video call, at the call's
peak, after it ends, and after a restart of the server; plus how long one simulated-GPU probe
read takes (median, p95). Figures, not assertions.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx

from vramtop.ports import free_port
from vramtop.sim.machine import SimMachine


def generated(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    m = re.search(r"^vllm:generation_tokens_total\{.*\} ([\d.e+]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def rate(url: str, speed: float, real_s: float = 1.0) -> float:
    t0, g0 = time.monotonic(), generated(url)
    time.sleep(real_s)
    return (generated(url) - g0) / ((time.monotonic() - t0) * speed)


def stream_forever(url: str, stop: threading.Event) -> None:
    body = {"prompt": "x" * 8000, "max_tokens": 10**7, "stream": True}
    try:
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=30) as r:
            for _ in r.iter_lines():
                if stop.is_set():
                    return
    except httpx.HTTPError:
        return


def start_server(m: SimMachine, util: float, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            m.server_argv(util, port=port),
            env=m.server_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/health", timeout=0.5).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    return proc, url


def measure(m: SimMachine, url: str, speed: float) -> float:
    stop = threading.Event()
    t = threading.Thread(target=stream_forever, args=(url, stop), daemon=True)
    t.start()
    time.sleep(0.3)
    value = rate(url, speed)
    stop.set()
    t.join(5)
    return value


def wait_level(m: SimMachine, level: float) -> None:
    while m.state()["call_level"] != level:
        time.sleep(0.05)


def run_budget(util: float, speed: float, home: Path) -> None:
    with SimMachine(home / f"u{util}", speed=speed, startup_s=0.3) as m:
        proc, url = start_server(m, util, home / f"u{util}.log")
        try:
            before = measure(m, url, speed)
            m.set_call(True)
            wait_level(m, 1.0)
            during = measure(m, url, speed)
            m.set_call(False)
            wait_level(m, 0.0)
            after = measure(m, url, speed)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc, url = start_server(m, util, home / f"u{util}.log")
        try:
            restarted = measure(m, url, speed)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print(
        f"util {util}: before {before:5.1f}  call {during:5.1f}  after call {after:5.1f}  "
        f"after restart {restarted:5.1f} tok/s  (call/before {during / before:.2f})"
    )


def probe_latency(home: Path, reads: int) -> None:
    with SimMachine(home / "probe") as m:
        probe = m.probe()
        times = []
        for _ in range(reads):
            t0 = time.perf_counter()
            probe.read()
            times.append(time.perf_counter() - t0)
    times.sort()
    print(
        f"sim probe read: median {statistics.median(times) * 1e3:.2f} ms, "
        f"p95 {times[int(len(times) * 0.95)] * 1e3:.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--speed", type=float, default=20.0)
    parser.add_argument("--budgets", default="0.93,0.85", help="comma-separated budgets")
    parser.add_argument("--reads", type=int, default=300, help="probe reads timed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["VRAMTOP_HOME"] = tmp
        for util in (float(b) for b in args.budgets.split(",") if b):
            run_budget(util, args.speed, Path(tmp))
        probe_latency(Path(tmp), args.reads)


if __name__ == "__main__":
    main()
