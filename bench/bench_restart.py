"""Restart overhead: from the restart request to /health 200, minus the fake server's own
configured startup time — vramtop's own cost (stop, tree check, memory-release check, launch,
readiness polling). Median over 20 restarts on the simulated machine. Target: under 1.5 s.

A baseline measured in the same run: the fake server started bare (Popen, poll /health), no
vramtop, so the interpreter's own start-up cost is visible apart from vramtop's.

    python -m bench.bench_restart [--restarts 20] [--startup 1.0]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from vramtop.config import Profile
from vramtop.ports import free_port
from vramtop.sim.machine import SimMachine


def bare_start(machine: SimMachine, argv: list[str], url: str) -> tuple[float, float]:
    """Seconds to /health 200 and to gone after SIGTERM, without vramtop."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=machine.server_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    with httpx.Client(timeout=1.0) as client:
        while True:
            try:
                if client.get(f"{url}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.01)
    ready = time.perf_counter() - t0
    t1 = time.perf_counter()
    proc.terminate()
    proc.wait()
    while machine.state()["servers"]:
        time.sleep(0.01)
    return ready, time.perf_counter() - t1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restarts", type=int, default=20, help="also bare starts, up to 5")
    parser.add_argument("--startup", type=float, default=1.0, help="fake server startup (s)")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="vramtop-bench-"))
    atexit.register(shutil.rmtree, home, True)  # the state, logs and sockets of this run
    os.environ["VRAMTOP_HOME"] = str(home)
    from vramtop.machines.demo_world import memory_released_check
    from vramtop.supervisor import Supervisor

    with SimMachine(home / "sim", speed=20.0, startup_s=args.startup) as machine:
        port = free_port()
        argv = machine.server_argv(port=port)
        env = machine.server_env()
        keep = ("VRAMTOP_SIM_SOCKET", "VRAMTOP_SIM_SPEED", "VRAMTOP_SIM_STARTUP_S")
        profile = Profile(
            name="bench", argv=argv, port=port, env={k: env[k] for k in keep if k in env}
        )
        url = profile.url
        bare = [bare_start(machine, argv, url) for _ in range(min(5, args.restarts))]
        bare_ready = statistics.median(b[0] for b in bare)
        bare_stop = statistics.median(b[1] for b in bare)

        sup = Supervisor(profile, memory_released=memory_released_check(machine))
        assert sup.start().ok
        totals, stops = [], []
        outliers: list[str] = []
        for _ in range(args.restarts):
            marks: dict[str, float] = {}
            t0 = time.perf_counter()

            def note(word: str, t0: float = t0, marks: dict[str, float] = marks) -> None:
                marks.setdefault(word, time.perf_counter() - t0)

            result = sup.restart(progress=note)
            total = time.perf_counter() - t0
            assert result.ok, result
            # /health 200 was seen inside restart(); confirm it from outside too.
            assert httpx.get(f"{url}/health").status_code == 200
            totals.append(total)
            if total > args.startup + 1.5:
                steps = ", ".join(f"{w} {t:.2f}" for w, t in marks.items())
                outliers.append(f"  slow restart {total:.2f} s: {steps}")
            stops.append(marks.get("memory released", float("nan")))
        sup.stop()

    med = statistics.median(totals)
    overhead = med - args.startup
    own = med - bare_ready - bare_stop
    print(f"restarts: {args.restarts}, fake server startup configured: {args.startup:.2f} s")
    print(f"restart request -> /health 200: median {med:.3f} s, max {max(totals):.3f} s")
    print(
        f"  of which stop + tree check + memory released: median {statistics.median(stops):.3f} s"
    )
    print(f"restart overhead (median - configured startup): {overhead:.3f} s  (target < 1.5 s)")
    print(
        f"baseline, bare server without vramtop: ready {bare_ready:.3f} s, "
        f"stop {bare_stop:.3f} s (interpreter start + configured startup)"
    )
    print(
        f"vramtop's own cost beyond the bare server: {own:.3f} s; "
        f"ratio restart / bare start+stop: {med / (bare_ready + bare_stop):.2f}"
    )
    for line in outliers:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
