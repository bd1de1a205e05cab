"""The measured minute of the console benches (bench_console, bench_fleet): in each child, an
app run headless and its own process's CPU over a span of its life; in the bench, the
children's figures collected.
"""

from __future__ import annotations

import json
import resource
import subprocess
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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


def collected(children: dict[str, subprocess.Popen[str]]) -> dict[str, dict[str, float]]:
    """Each child's figures (the JSON it printed last), by its name, once all have ended; a
    child that failed ends the bench with its error."""
    results = {}
    for name, child in children.items():
        out, err = child.communicate()
        if child.returncode != 0:
            raise SystemExit(f"the {name} run failed:\n{err[-3000:]}")
        results[name] = json.loads(out.strip().splitlines()[-1])
    return results
