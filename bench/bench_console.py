"""vramtop's own CPU while showing the demo at 1 Hz, against a one-Sparkline Textual app.

Each app runs headless in its own child process, which reports its own CPU time (user + system,
all threads) via getrusage; nothing else on the machine is counted. The runs (`--only`):

- floor: a minimal Textual app updating one Sparkline at 1 Hz;
- demo: vramtop's console on the demo (`vramtop --demo`), measured once the simulated vLLM is
  serving. The simulator (GPU, server, and the agent sending it requests) runs in other
  processes and is not counted. This is the figure the target applies to: at most 1.5× the
  floor;
- ui: the console on the deterministic fake backend (no reads at all): what drawing costs;
- ui-log: the same, while the server writes `--log-rate` request lines a second (20 by
  default) to its log; ui-log - ui is what the server log costs at that rate;
- reads, still-log (not run by default): the demo with one part left out once the server
  serves, to see what each part costs. "reads" reads as the demo does but draws nothing
  (the reads and the samples' messages); "still-log" draws all but the server log's new
  lines. So demo - still-log is the log, and still-log - reads the header and panels.

    python bench/bench_console.py [--seconds 60] [--size 120x40] [--only floor,demo,ui]
                                  [--repeat N] [--apart] [--settle S]

The runs go side by side, at the same time: the floor itself moved from 0.18 to 0.40 s a
minute from one minute to the next on a shared machine, and a floor measured in another minute
than the demo made the ratio swing with it. `--apart` runs them one after the other instead.
With --repeat N it is all done N times and the median ratio is printed too.
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
from typing import Any

WARMUP_S = 3.0  # after the server serves: the first samples carry one-off work (startup facts)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(
    kind: str,
    seconds: float,
    size: tuple[int, int],
    settle_s: float = WARMUP_S,
    log_rate: float = 0.0,
) -> None:
    from _bench_apps import FloorApp, console_app, demo_console_app

    app: Any
    if kind in DEMO_KINDS:
        app, ready, close = demo_console_app(part=None if kind == "demo" else kind)
    else:
        if kind == "ui":
            app = console_app()
        elif kind == "ui-log":
            app = console_app(log_rate=log_rate)
        else:
            app = FloorApp()
        ready, close = (lambda: True), (lambda: None)
    result: dict[str, float] = {}

    def begin() -> None:
        if not ready():
            app.set_timer(0.5, begin)
            return
        app.set_timer(settle_s, measure)

    def measure() -> None:
        start_cpu, start_wall = _cpu(), time.monotonic()

        def end() -> None:
            result["cpu_s"] = _cpu() - start_cpu
            result["wall_s"] = time.monotonic() - start_wall
            app.exit()

        app.set_timer(seconds, end)

    app.call_later(lambda: app.set_timer(1.0, begin))
    app.run(headless=True, size=size)
    close()
    print(json.dumps(result))


def measure(
    kinds: list[str], seconds: float, size: str, settle_s: float = WARMUP_S, log_rate: float = 0.0
) -> dict[str, dict[str, float]]:
    """Run each app in a child of its own, all at once: whatever else the machine does in
    that minute (its clock speed, other tenants) weighs on each of them alike."""
    with tempfile.TemporaryDirectory() as homes:
        # Each run's state (simulated GPU socket, server log) in a throwaway home of its own:
        # each demo run has a simulated machine of its own. The simulated server starts
        # quickly.
        args = ["--seconds", str(seconds), "--size", size, "--settle", str(settle_s)]
        args += ["--log-rate", str(log_rate)]
        children = {
            kind: subprocess.Popen(
                [sys.executable, __file__, "--child", kind, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={
                    **os.environ,
                    "VRAMTOP_HOME": os.path.join(homes, kind),
                    "VRAMTOP_SIM_STARTUP_S": "0.3",
                },
            )
            for kind in kinds
        }
        results = {}
        for kind, child in children.items():
            out, err = child.communicate()
            if child.returncode != 0:
                raise SystemExit(f"the {kind} run failed:\n{err}")
            results[kind] = json.loads(out.strip().splitlines()[-1])
    return results


LABELS = {
    "floor": "floor (1 Sparkline @1 Hz)",
    "demo": "vramtop --demo @1 Hz",
    "ui": "console, fake backend",
    "ui-log": "console, fake backend + log",
    "reads": "demo, reads only",
    "still-log": "demo, log held still",
}
KINDS = tuple(LABELS)
# The demo, whole or with the part of that name left out once the server serves (see
# demo_console_app).
DEMO_KINDS = ("demo", "reads", "still-log")


def report(results: dict[str, dict[str, float]], log_rate: float = 0.0) -> dict[str, float]:
    """Print one run's figures; its ratios to the floor."""
    for kind, r in results.items():
        share = r["cpu_s"] / r["wall_s"] * 100
        print(
            f"{LABELS[kind]:<27} cpu {r['cpu_s']:.3f} s over {r['wall_s']:.1f} s "
            f"({share:.2f} % of a core)"
        )
    ratios = {}
    floor = results.get("floor", {}).get("cpu_s")
    for kind in KINDS[1:]:
        if floor and kind in results:
            ratios[kind] = results[kind]["cpu_s"] / floor
            target = " (target <= 1.5x)" if kind == "demo" else ""
            print(f"ratio {kind}/floor: {ratios[kind]:.2f}x{target}")
    if floor and "ui" in results and "ui-log" in results:
        ratios["log"] = (results["ui-log"]["cpu_s"] - results["ui"]["cpu_s"]) / floor
        print(
            f"the server log at {log_rate:g} lines/s: (ui-log - ui)/floor = "
            f"{ratios['log']:.2f}x (target <= 0.15x)"
        )
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--size", default="120x40")
    parser.add_argument(
        "--only",
        default="floor,demo,ui",
        help="comma-separated runs, of: " + ", ".join(KINDS) + " (reads and still-log are "
        "the demo with a part left out, to see what each part costs)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, in turn")
    parser.add_argument(
        "--apart", action="store_true", help="one run after the other, not all at once"
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=WARMUP_S,
        help="seconds from the server serving to the start of the measured minute (the "
        "first minute has a per-second uptime and a growing log; later ones do not)",
    )
    parser.add_argument(
        "--log-rate", type=float, default=20.0, help="request lines a second for ui-log"
    )
    parser.add_argument("--child", choices=KINDS)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    if args.child:
        child(args.child, args.seconds, (width, height), args.settle, args.log_rate)
        return 0
    asked = args.only.split(",")
    unknown = sorted(set(asked) - set(KINDS))
    if unknown:
        parser.error(f"unknown run {', '.join(unknown)}: choose from {', '.join(KINDS)}")
    kinds = [k for k in KINDS if k in asked]
    ratios: dict[str, list[float]] = {k: [] for k in (*KINDS[1:], "log")}
    for run in range(1, args.repeat + 1):
        if args.repeat > 1:
            print(f"run {run} of {args.repeat}")
        if args.apart:
            results = {
                k: measure([k], args.seconds, args.size, args.settle, args.log_rate)[k]
                for k in kinds
            }
        else:
            results = measure(kinds, args.seconds, args.size, args.settle, args.log_rate)
        for kind, ratio in report(results, args.log_rate).items():
            ratios[kind].append(ratio)
    if args.repeat > 1:
        for kind, values in ratios.items():
            if values:
                spread = ", ".join(f"{v:.2f}" for v in values)
                print(f"median ratio {kind}/floor: {statistics.median(values):.2f}x ({spread})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
