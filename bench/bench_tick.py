"""One full sampling tick (GPU probe + scrape + parse + sample) against the simulator.

Prints the median and p95 wall time and vramtop's own CPU time per tick (the simulated GPU,
the fake server and the load generator run in other processes and are not counted), and the
ratio of a tick's CPU to a bare HTTP GET of /metrics measured in the same run.

    python bench/bench_tick.py [--ticks 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from vramtop.monitor import Monitor
from vramtop.sim.machine import SimMachine, free_port


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ticks", type=int, default=200)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        machine = SimMachine(home, startup_s=0.3).start()
        port = free_port()
        log = open(home / "server.log", "wb")  # noqa: SIM115
        server = subprocess.Popen(
            machine.server_argv(port=port),
            env=machine.server_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        load = None
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            load = subprocess.Popen(
                [sys.executable, "-m", "vramtop.sim.load", "--url", url, "--concurrency", "2"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)
            monitor = Monitor(probe=machine.probe(), url=url, log_path=lambda: home / "server.log")
            monitor.tick()  # first tick also fetches /version and /v1/models
            walls, cpus = [], []
            for _ in range(args.ticks):
                w0, c0 = time.perf_counter(), time.process_time()
                sample = monitor.tick()
                cpus.append(time.process_time() - c0)
                walls.append(time.perf_counter() - w0)
            assert sample.server is not None and sample.server.reachable

            client = httpx.Client(trust_env=False)
            bare = []
            for _ in range(args.ticks):
                c0 = time.process_time()
                client.get(f"{url}/metrics").raise_for_status()
                bare.append(time.process_time() - c0)
            client.close()
        finally:
            if load is not None:
                load.terminate()
                load.wait(5)
            os.killpg(server.pid, 15)
            server.wait(5)
            log.close()
            machine.stop()

    ms = 1000.0
    print(f"ticks: {args.ticks}")
    print(
        f"tick wall: median {statistics.median(walls) * ms:.2f} ms, "
        f"p95 {percentile(walls, 0.95) * ms:.2f} ms"
    )
    print(
        f"tick CPU (vramtop's own): median {statistics.median(cpus) * ms:.2f} ms, "
        f"p95 {percentile(cpus, 0.95) * ms:.2f} ms  (target: well under 20 ms)"
    )
    print(
        f"bare GET /metrics CPU: median {statistics.median(bare) * ms:.2f} ms; "
        f"ratio tick/bare {statistics.median(cpus) / max(statistics.median(bare), 1e-9):.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
