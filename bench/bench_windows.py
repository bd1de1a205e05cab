"""What the Windows side costs the console's tick.

1. Parsing one PowerShell line (a field-report desktop: 6 process instances, 2 adapters):
   vramtop's parse_line against json.loads alone (the floor it builds on).
2. `WindowsGpuSource.read()` while the fake PowerShell is still in its slow start, against
   starting a fresh PowerShell per sample (what the long-lived loop avoids): the fake's start
   is only Python's, so the real ratio (Windows PowerShell: seconds) is far larger.

Usage: python -m bench.bench_windows [--rounds 2000] [--starts 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from vramtop.core.windows.powershell import parse_line  # noqa: E402
from vramtop.sources.windows_counters import WindowsGpuSource  # noqa: E402
from vramtop.sources.wsl_powershell import powershell_argv  # noqa: E402

FAKE_DIR = ROOT / "tests" / "fixtures" / "fake_powershell"


def one_line(env: dict[str, str]) -> str:
    proc = subprocess.Popen(
        powershell_argv(str(FAKE_DIR / "powershell.exe"), 1.0),
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    proc.kill()
    proc.wait()
    return line


def median(fn: object, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2000, help="parses and reads timed")
    parser.add_argument("--starts", type=int, default=5, help="fresh PowerShells timed")
    args = parser.parse_args()
    env = dict(os.environ, VRAMTOP_FAKE_PS_MODE="normal")
    line = one_line(env)
    parse = median(lambda: parse_line(line, 0.0), args.rounds)
    floor = median(lambda: json.loads(line), args.rounds)
    print(
        f"parse_line: {parse * 1e6:.1f} µs/line; json.loads alone {floor * 1e6:.1f} µs "
        f"(x{parse / floor:.1f})"
    )

    slow = dict(
        env,
        VRAMTOP_FAKE_PS_MODE="slow",
        VRAMTOP_FAKE_PS_START_DELAY_S="30",
        PATH=f"{FAKE_DIR}{os.pathsep}{env['PATH']}",
    )
    source = WindowsGpuSource(interval_s=1.0, env=slow, check_interop=False)
    try:
        source.read()
        read = median(source.read, args.rounds)
    finally:
        source.close()
    per_sample = median(lambda: one_line(env), args.starts)
    print(
        f"read() during a slow start: {read * 1e6:.1f} µs; a fresh (fake) PowerShell per "
        f"sample {per_sample * 1e3:.0f} ms (x{per_sample / read:,.0f})"
    )


if __name__ == "__main__":
    main()
