"""One-shot answers: `vramtop --once --json --url` against a ready (simulated) server, and
`vramtop --demo --once`, timed as people run them.

`--once` reads vLLM's counters twice, 1 s apart (its rate window), so the figure that matters
is the time beyond that window. For `--demo --once` it is the time beyond the simulated
server's own start (VRAMTOP_SIM_STARTUP_S, set here) and the window. Each command runs as a
fresh process with byte-compiled modules (as installed: PYTHONDONTWRITEBYTECODE is dropped
and a first run writes them); its CPU (user + system, from the kernel) is printed beside its
wall time, since wall time swings with whatever else the machine does. The baseline in the
same run: `python -c pass` (an interpreter's start alone).

`--baseline DIR` also runs each command from another checkout (DIR, e.g. a `git worktree` of
the revision before a change; its own simulated server for `--demo --once`), the two taking
turns, so that before and after see the same load.

    python -m bench.bench_once [--runs 5] [--only url,demo] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

WINDOW_S = 1.0  # vramtop.commands.monitor.ONCE_GAP_S
SIM_STARTUP_S = 0.3
BASELINE_MARK = "BENCH_ONCE_BASELINE"  # in a baseline command's environment


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (the child's), stdout. A baseline's command runs in its
    checkout (`python -m` looks in the current folder before PYTHONPATH)."""
    cwd = env.get("PYTHONPATH") if env.get(BASELINE_MARK) else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def row(label: str, walls: list[float], cpus: list[float], beyond: float) -> None:
    wall = statistics.median(walls)
    print(
        f"{label:<45} wall median {wall:5.2f} s (beyond {beyond:g} s: {wall - beyond:5.2f} s)"
        f"  CPU median {statistics.median(cpus):5.2f} s  ({len(walls)} runs)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="url,demo", help="url, demo or both")
    parser.add_argument(
        "--baseline", default=None, help="another checkout to run the same commands from"
    )
    args = parser.parse_args()
    kinds = args.only.split(",")
    vramtop = [sys.executable, "-m", "vramtop"]
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(VRAMTOP_HOME=home, VRAMTOP_SIM_STARTUP_S=str(SIM_STARTUP_S))
        # The baseline's commands: its modules first on the path (the simulated processes
        # they start inherit it). Byte-compiled by a first run, as the checkout's own are.
        before = None
        if args.baseline:
            baseline = os.path.abspath(args.baseline)
            before = {**env, "PYTHONPATH": baseline, BASELINE_MARK: "1"}
            timed([*vramtop, "--version"], before)
        subprocess.run([*vramtop, "start", "--demo"], env=env, check=True, capture_output=True)
        try:
            status = json.loads(
                timed([*vramtop, "status", "--demo", "--json"], env)[2]  # also writes .pyc
            )
            url = f"http://127.0.0.1:{status['port']}"
            results: dict[str, tuple[list[float], list[float]]] = {}
            commands = {"floor": ([sys.executable, "-c", "pass"], env)}
            if "url" in kinds:
                commands["url"] = ([*vramtop, "--once", "--json", "--url", url], env)
                if before is not None:
                    commands["url before"] = (commands["url"][0], before)
            for _ in range(args.runs):
                for kind, (argv, kind_env) in commands.items():
                    wall, cpu, out = timed(argv, kind_env)
                    if kind.startswith("url") and json.loads(out)["rates"] is None:
                        raise SystemExit("--once printed no rates")
                    walls, cpus = results.setdefault(kind, ([], []))
                    walls.append(wall)
                    cpus.append(cpu)
        finally:
            subprocess.run([*vramtop, "stop", "--demo"], env=env, capture_output=True)
        if "demo" in kinds:
            # Its own home: the command starts the simulated machine and stops it again.
            demo_envs = {"demo": env, **({"demo before": before} if before is not None else {})}
            for _ in range(args.runs):
                for kind, kind_env in demo_envs.items():
                    with tempfile.TemporaryDirectory() as own:
                        wall, cpu, _out = timed(
                            [*vramtop, "--demo", "--once"], {**kind_env, "VRAMTOP_HOME": own}
                        )
                    walls, cpus = results.setdefault(kind, ([], []))
                    walls.append(wall)
                    cpus.append(cpu)

    row("python -c pass", *results["floor"], 0.0)
    for kind in ("url before", "url"):
        if kind in results:
            label = "vramtop --once --json --url" + (" (baseline)" if "before" in kind else "")
            row(label, *results[kind], WINDOW_S)
    for kind in ("demo before", "demo"):
        if kind in results:
            label = "vramtop --demo --once" + (" (baseline)" if "before" in kind else "")
            row(label, *results[kind], WINDOW_S + SIM_STARTUP_S)
    print(
        "targets: --once --url <= 0.3 s beyond its window; --demo --once <= 1 s beyond the "
        "simulated server's start (wall times here swing with the machine's load)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
