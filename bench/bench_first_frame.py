"""Time from launching a process to its first complete frame: vramtop vs a minimal Textual app.

The child marks the moment its first frame with real data has been drawn (for vramtop: after
the first sample was rendered) on the system-wide monotonic clock; the parent started its clock
just before launching it. Median of --runs.

    python bench/bench_first_frame.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def child(kind: str) -> None:
    from _bench_apps import FloorApp, console_app

    marks: list[float] = []

    def drawn() -> None:
        if not marks:
            marks.append(time.monotonic())
            app.exit()

    app = console_app(on_first_sample=drawn) if kind == "console" else FloorApp()
    if kind != "console":
        app.call_later(lambda: app.call_after_refresh(drawn))
    app.run(headless=True, size=(120, 40))
    print(marks[0])


def measure(kind: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.monotonic()
        out = subprocess.run(
            [sys.executable, __file__, "--child", kind], capture_output=True, text=True, check=True
        ).stdout
        times.append(float(out.strip().splitlines()[-1]) - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=None, help="ignored; for symmetry")
    parser.add_argument("--child", choices=["console", "floor"])
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    floor = measure("floor", args.runs)
    console = measure("console", args.runs)
    print(f"minimal Textual app first frame: {floor * 1000:.0f} ms (median of {args.runs})")
    print(f"vramtop console first frame:     {console * 1000:.0f} ms (median of {args.runs})")
    print(f"ratio: {console / floor:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
