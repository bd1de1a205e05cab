"""The measured minute of a console bench's child: an app run headless, and its own process's
CPU over a span of its life (bench_console, bench_fleet)."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable

from textual.app import App


def own_cpu_s() -> float:
    """This process's CPU time so far: user + system, all its threads (not its children)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measured_run(
    app: App[object],
    seconds: float,
    size: tuple[int, int],
    settle_s: float,
    ready: Callable[[], bool] | None = None,
) -> dict[str, float]:
    """Run `app` headless in a terminal of `size`, and measure `seconds` of it: {"cpu_s",
    "wall_s"}; the app exits then. The span begins `settle_s` after the start, or, with
    `ready`, `settle_s` after `ready()` first holds (asked from a second after the start,
    every half second)."""
    result: dict[str, float] = {}

    def measure() -> None:
        start_cpu, start_wall = own_cpu_s(), time.monotonic()

        def end() -> None:
            result["cpu_s"] = own_cpu_s() - start_cpu
            result["wall_s"] = time.monotonic() - start_wall
            app.exit()

        app.set_timer(seconds, end)

    def begin() -> None:
        if ready is not None and not ready():
            app.set_timer(0.5, begin)
            return
        app.set_timer(settle_s, measure)

    if ready is None:
        app.call_later(begin)
    else:
        app.call_later(lambda: app.set_timer(1.0, begin))
    app.run(headless=True, size=size)
    return result
