"""The AMD probe's per-process read: DRM fdinfo over this machine's /proc.

Finding the fds open on /dev/dri means listing and reading the link of every fd of every
process; the probe does that in full every few seconds (FdinfoIndex) and otherwise reads only
the fdinfo of the fds it found, and searches processes it has not seen before. Prints the CPU
time per tick of a full search and of an indexed tick, and their ratio, in the same run (CPU
time of this process: other load on the machine does not count).

    python -m bench.bench_fdinfo [--ticks 50] [--proc /proc]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from vramtop.sources.amd_fdinfo import FdinfoIndex


def cpu_per_tick(index: FdinfoIndex, ticks: int) -> float:
    samples = []
    for _ in range(ticks):
        start = time.process_time()
        index.scan()
        samples.append(time.process_time() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ticks", type=int, default=50)
    parser.add_argument("--proc", type=Path, default=Path("/proc"))
    args = parser.parse_args()
    pids = sum(name.isdigit() for name in os.listdir(args.proc))
    full = cpu_per_tick(FdinfoIndex(args.proc, refresh_s=0.0), args.ticks)
    indexed_probe = FdinfoIndex(args.proc, refresh_s=float("inf"))
    indexed_probe.scan()  # the first tick searches everything
    indexed = cpu_per_tick(indexed_probe, args.ticks)
    print(f"processes: {pids}")
    print(f"full search per tick:    {full * 1000:.2f} ms CPU")
    print(f"indexed tick:            {indexed * 1000:.2f} ms CPU")
    print(f"ratio full / indexed:    {full / indexed if indexed else float('inf'):.1f}x")


if __name__ == "__main__":
    main()
