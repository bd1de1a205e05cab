"""One full sampling tick (GPU probe + scrape + parse + sample) against the simulator.

Prints the median and p95 wall time and vramtop's own CPU time per tick (the simulated GPU,
the fake server and the load generator run in other processes and are not counted), and the
ratio of a tick's CPU to a bare HTTP GET of /metrics (http.client, kept alive) in the same run.

With --demo it measures what the console's worker thread asks of the demo backend once a second
instead: `tick()`, whose frame carries the log tail, findings, events and the rest, on the
calling thread's CPU clock (the demo's load generator runs in this process, in other threads,
and is not counted). --profile adds the functions that cost most, from cProfile on the same
clock.

    python -m bench.bench_tick [--ticks 200]
    python -m bench.bench_tick --demo [--seconds 20] [--profile]
    python -m bench.bench_tick --worst [--hz 4]

With --worst it measures the console's whole tick (`MachineBackend.tick`: the reads and the
live session; the supervisor's housekeeping runs on its own thread, `run_housekeeping`, as in the
console) on the demo while something slow is in progress on another thread, as in the console
(its actions run in workers beside the tick): steady, a stop,
a start, a restart, and a /metrics that accepts the connection and never answers (the scrape
runs into its timeout). Per phase: the ticks, their CPU (this thread's clock: median and
worst) and their wall time (worst): the target is at most 20 ms CPU at the worst, and a
wall time that the action does not hold (the slow scrape's is its timeout, by design).
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from vramtop.machines.sampler import Sampler
from vramtop.ports import free_port
from vramtop.sim.machine import SimMachine


def response_ok(response: http.client.HTTPResponse) -> http.client.HTTPResponse:
    if response.status != 200:
        raise SystemExit(f"GET /metrics answered HTTP {response.status}")
    return response


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ticks", type=int, default=200)
    parser.add_argument("--demo", action="store_true", help="the demo backend at 1 Hz")
    parser.add_argument("--seconds", type=int, default=20, help="with --demo: ticks, 1 a second")
    parser.add_argument("--profile", action="store_true", help="with --demo: top functions")
    parser.add_argument("--worst", action="store_true", help="ticks during slow actions")
    parser.add_argument("--hz", type=float, default=4.0, help="with --worst: ticks a second")
    parser.add_argument(
        "--steady", type=int, default=8, help="with --worst: ticks with nothing in progress"
    )
    args = parser.parse_args()
    if args.worst:
        return worst(args.hz, args.steady)
    if args.demo:
        return demo(args.seconds, args.profile)

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
            sampler = Sampler(probe=machine.probe(), url=url, log_path=lambda: home / "server.log")
            sampler.tick()  # first tick also fetches /version and /v1/models
            walls, cpus = [], []
            for _ in range(args.ticks):
                w0, c0 = time.perf_counter(), time.process_time()
                sample = sampler.tick()
                cpus.append(time.process_time() - c0)
                walls.append(time.perf_counter() - w0)
            assert sample.server is not None and sample.server.reachable

            # The same HTTP stack the scraper uses: http.client on one kept-alive connection.
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            bare = []
            for _ in range(args.ticks):
                c0 = time.process_time()
                connection.request("GET", "/metrics")
                response = response_ok(connection.getresponse())
                response.read().decode()
                bare.append(time.process_time() - c0)
            connection.close()
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


def demo(seconds: int, profile: bool) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        # Read when the demo's paths and the simulated server's start-up are looked up, so
        # setting them here, before the backend exists, is enough.
        os.environ.update(VRAMTOP_HOME=tmp, VRAMTOP_SIM_STARTUP_S="0.3")
        from vramtop.core.model import ServerState
        from vramtop.machines.demo_backend import demo_backend
        from vramtop.machines.demo_world import demo_machine, world_alive

        backend, _owned = demo_backend()
        try:
            started = backend.start(progress=None)
            if not started.ok:
                raise SystemExit(f"the simulated server did not start: {started.message}")
            deadline = time.monotonic() + 60
            while (info := backend.tick().sample.info) is None or info.state != ServerState.RUNNING:
                if time.monotonic() > deadline:
                    raise SystemExit("the simulated server did not come up")
                time.sleep(0.2)
            time.sleep(1.0)  # let the load generator get going

            def one_tick() -> None:
                backend.tick()  # its frame carries the log tail, findings, events, …

            profiler = None
            if profile:
                import cProfile

                profiler = cProfile.Profile(time.thread_time)
            cpus, next_at = [], time.monotonic()
            for _ in range(seconds):
                c0 = time.thread_time()
                if profiler is not None:
                    profiler.runcall(one_tick)
                else:
                    one_tick()
                cpus.append(time.thread_time() - c0)
                next_at += 1.0
                time.sleep(max(0.0, next_at - time.monotonic()))
        finally:
            backend.close(True)
            # The simulated GPU stops on request, a moment later: wait for it before its
            # directory goes.
            deadline = time.monotonic() + 10
            while world_alive(demo_machine()) and time.monotonic() < deadline:
                time.sleep(0.1)

    ms = 1000.0
    print(
        f"demo ticks: {len(cpus)} at 1 Hz (tick + log_lines, findings, events, headroom, baseline)"
    )
    print(
        f"CPU per tick (this thread): median {statistics.median(cpus) * ms:.2f} ms, "
        f"mean {statistics.mean(cpus) * ms:.2f} ms, p95 {percentile(cpus, 0.95) * ms:.2f} ms"
        + ("  (under cProfile)" if profiler is not None else "")
    )
    if profiler is not None:
        import pstats

        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    return 0


def worst(hz: float, steady: int) -> int:
    import socket
    import threading

    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update(VRAMTOP_HOME=tmp, VRAMTOP_SIM_STARTUP_S="0.3")
        from vramtop.core.model import ServerState
        from vramtop.machines.demo_backend import demo_backend
        from vramtop.machines.demo_world import demo_machine, world_alive
        from vramtop.machines.machine_backend import MachineBackend

        backend, _owned = demo_backend()
        backend.run_housekeeping()  # the housekeeping on its own thread, as the console runs it
        # A /metrics that takes the connection (the kernel's backlog) and never answers.
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        silent_url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        slow = MachineBackend(
            sampler=Sampler(probe=demo_machine().probe(), url=silent_url, timeout_s=1.0),
            supervisor=None,
        )
        rows: list[tuple[str, list[float], list[float]]] = []

        def ticks(label: str, target: MachineBackend, action: Any = None, least: int = 3) -> None:
            thread = threading.Thread(target=action, daemon=True) if action else None
            if thread is not None:
                thread.start()
            cpus: list[float] = []
            walls: list[float] = []
            next_at = time.monotonic()
            while len(cpus) < least or (thread is not None and thread.is_alive()):
                w0, c0 = time.monotonic(), time.thread_time()
                target.tick()
                cpus.append(time.thread_time() - c0)
                walls.append(time.monotonic() - w0)
                next_at += 1.0 / hz
                time.sleep(max(0.0, next_at - time.monotonic()))
            rows.append((label, cpus, walls))

        try:
            started = backend.start(progress=None)
            if not started.ok:
                raise SystemExit(f"the simulated server did not start: {started.message}")
            deadline = time.monotonic() + 60
            while (info := backend.tick().sample.info) is None or info.state != ServerState.RUNNING:
                if time.monotonic() > deadline:
                    raise SystemExit("the simulated server did not come up")
                time.sleep(0.2)
            time.sleep(1.0)
            ticks("steady", backend, least=steady)
            ticks("stop in progress", backend, lambda: backend.stop(progress=None))
            ticks("start in progress", backend, lambda: backend.start(progress=None))
            ticks("restart in progress", backend, lambda: backend.restart(progress=None))
            slow.tick()  # the first tick also asks for /version and /v1/models
            ticks("/metrics never answers", slow)
        finally:
            silent.close()
            backend.close(True)
            deadline = time.monotonic() + 10
            while world_alive(demo_machine()) and time.monotonic() < deadline:
                time.sleep(0.1)

    ms = 1000.0
    print(f"the console's tick (MachineBackend.tick) at {hz:g} Hz on the demo, this thread's CPU:")
    for label, cpus, walls in rows:
        print(
            f"  {label:<24} {len(cpus):3d} ticks  CPU median {statistics.median(cpus) * ms:6.2f} ms"
            f"  worst {max(cpus) * ms:6.2f} ms   wall worst {max(walls) * ms:7.1f} ms"
        )
    worst_cpu = max(max(cpus) for _, cpus, _ in rows)
    print(f"worst tick CPU: {worst_cpu * ms:.2f} ms (target <= 20 ms: {worst_cpu * ms / 20:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
