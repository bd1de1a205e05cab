"""The console's memory over a day at 1 Hz, on a fast clock: RSS growth per simulated hour.

The console runs headless on the tests' scripted backend, whose clock (the one the console is
given too) advances one second a tick. Each simulated hour has a video call of ten minutes
that collapses the rate and a restart after it, and the server writes two request lines a
second to its log; a real `LiveSession` (events, findings, diagnosis) observes every sample,
as it does on a real machine. Every tick's sample goes through the console's own read and
message handler, so what the console keeps per tick (sparklines, log, events, findings, the
diagnosis's history) builds up as it would over a day; the screen is painted every
PAINT_EVERY ticks.

    python -m bench.bench_memory [--hours 24] [--size 120x40]

It prints the RSS at each simulated hour and the growth per hour in the first and the last
quarter of the run: memory that is bounded flattens (the last quarter's growth near zero).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

from tests.support.fake_backend import FakeBackend
from vramtop.core.model import Sample
from vramtop.session.live import LiveSession
from vramtop.settings import Settings
from vramtop.tui.app import VramtopApp

HOUR = 3600
CALL = (1200, 1800)  # seconds into each hour: a ten-minute call, then a restart
MIB = 1024 * 1024
PAINT_EVERY = 20  # ticks handled between two paints of the screen


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class DayOfTraffic(FakeBackend):
    """The scripted backend with a call an hour, a busy log and a real live session."""

    def __init__(self) -> None:
        super().__init__()
        self._live = LiveSession(log_lines=self.log_lines)

    @property
    def session(self) -> LiveSession:
        return self._live

    def next_sample(self) -> Sample:
        second = int(self.t) % HOUR
        if second == CALL[0]:
            self.call_on = True
        elif second == CALL[1]:
            self.call_on = False
            self.restart()
        self._log += [
            f'INFO:     127.0.0.1:{40000 + int(self.t) % 20000} - "POST /v1/chat/completions '
            f'HTTP/1.1" 200 OK ({i})'
            for i in range(2)
        ]
        del self._log[:-2000]  # the log file is the server's; vramtop reads its tail
        sample = super().next_sample()
        self.session.observe(sample)
        return sample

    def findings(self) -> Any:
        return self.session.findings()

    def events(self) -> Any:
        return self.session.events()


async def run(hours: float, size: tuple[int, int]) -> list[tuple[float, int]]:
    backend = DayOfTraffic()
    app = VramtopApp(backend, Settings(interval_s=3600), clock=backend.clock)
    points: list[tuple[float, int]] = []
    total = int(hours * HOUR)
    every = max(1, min(HOUR, total // 24))
    started = time.monotonic()
    async with app.run_test(size=size) as pilot:
        for tick in range(total + 1):
            # The console's own read (what its reader thread does each second), here on the
            # event loop: its SampleArrived message is handled as every other is. The screen
            # is painted after each batch (painting keeps nothing from one frame to the next).
            app.reader.read(tick)
            if tick % PAINT_EVERY == 0:
                await pilot.pause()
            if tick % every == 0:
                points.append((backend.t / HOUR, rss_bytes()))
                print(
                    f"simulated {backend.t / HOUR:6.2f} h  RSS {rss_bytes() / MIB:7.1f} MiB  "
                    f"({time.monotonic() - started:.0f} s real)",
                    flush=True,
                )
    return points


def growth_per_hour(points: list[tuple[float, int]]) -> tuple[float, float]:
    """MiB per simulated hour over the first and the last quarter of the run."""
    quarter = max(1, len(points) // 4)
    first, last = points[: quarter + 1], points[-quarter - 1 :]

    def slope(part: list[tuple[float, int]]) -> float:
        (h0, r0), (h1, r1) = part[0], part[-1]
        return (r1 - r0) / MIB / (h1 - h0) if h1 > h0 else 0.0

    return slope(first), slope(last)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hours", type=float, default=24.0, help="simulated hours at 1 Hz")
    parser.add_argument("--size", default="120x40")
    args = parser.parse_args()
    if not args.hours > 0:
        parser.error("--hours must be a positive number")
    width, height = (int(v) for v in args.size.split("x"))
    points = asyncio.run(run(args.hours, (width, height)))
    first, last = growth_per_hour(points)
    print(f"RSS growth: first quarter {first:+.2f} MiB/h, last quarter {last:+.2f} MiB/h")
    if first > 0:
        print(f"ratio last/first: {last / first:.2f}x (bounded memory: near 0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
