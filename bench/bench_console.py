"""vramtop's own CPU while showing a backend at 1 Hz, against a one-Sparkline Textual app.

Each app runs headless in its own child process, which reports its own CPU time (user + system,
all threads) via getrusage: nothing else on the machine is counted. Target: ratio ≤ 1.5.

    python bench/bench_console.py [--seconds 60] [--size 120x40]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def child(kind: str, seconds: float, size: tuple[int, int]) -> None:
    from _bench_apps import FloorApp, console_app

    app = console_app() if kind == "console" else FloorApp()
    start: dict[str, float] = {}

    def begin() -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        start["cpu"] = usage.ru_utime + usage.ru_stime
        start["wall"] = time.monotonic()
        app.set_timer(seconds, app.exit)

    # Measure the steady state, not the start-up (bench_first_frame.py covers that).
    app.call_later(lambda: app.set_timer(1.0, begin))
    app.run(headless=True, size=size)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - start["cpu"]
    wall = time.monotonic() - start["wall"]
    print(json.dumps({"cpu_s": cpu, "wall_s": wall}))


def measure(kind: str, seconds: float, size: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--seconds", str(seconds), "--size", size],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--size", default="120x40")
    parser.add_argument("--child", choices=["console", "floor"])
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    if args.child:
        child(args.child, args.seconds, (width, height))
        return 0
    floor = measure("floor", args.seconds, args.size)
    console = measure("console", args.seconds, args.size)
    ratio = console["cpu_s"] / floor["cpu_s"] if floor["cpu_s"] > 0 else float("inf")
    for name, r in (("floor (1 Sparkline @1 Hz)", floor), ("vramtop console @1 Hz", console)):
        share = r["cpu_s"] / r["wall_s"] * 100
        print(
            f"{name:<28} cpu {r['cpu_s']:.3f} s over {r['wall_s']:.1f} s ({share:.2f} % of a core)"
        )
    print(f"ratio console/floor: {ratio:.2f}x (target <= 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
