"""Counter rates, and the normal token rate of one server start, learned so that a collapse
cannot become it (`normal_rate` keeps one `NormalQuantile` per measure and concurrency).

A median of the last minute is not enough: a sustained collapse becomes its own normal within
a minute. So the normal here is a high quantile (p90) of per-sample rates measured *while
requests were running*, over a long bounded reservoir, and fed only with samples that are not
under suspicion: once the normal is known, a sample below half of it is kept out. The normal
therefore freezes during a collapse, and still follows a slow legitimate drift (longer
contexts decode a little slower) because samples between 50 % and 100 % still enter and old
ones age out of the reservoir.
"""

from __future__ import annotations

from collections import deque

# Per-sample rates kept: ten minutes of running time at 1 Hz.
RESERVOIR = 600
# Samples needed before the normal is trusted (a start has to show what normal is).
WARMUP_SAMPLES = 10
QUANTILE = 0.9
# Once known, a sample below this share of the normal is suspect and does not teach it.
ADMIT_RATIO = 0.5
# Two readings further apart than this average unrelated periods: no rate between them.
MAX_GAP_S = 30.0


def counter_delta(previous: float | None, current: float | None) -> float | None:
    """How much a cumulative counter grew; None when unknown or when it reset (went down)."""
    if previous is None or current is None or current < previous:
        return None
    return current - previous


def counter_rate(
    previous: float | None, current: float | None, dt: float, max_gap_s: float = MAX_GAP_S
) -> float | None:
    """Per-second growth of a counter between two readings `dt` seconds apart.

    None across a reset (vLLM's counters restart with the server) and across a gap so long
    that the rate would average unrelated periods.
    """
    delta = counter_delta(previous, current)
    if delta is None or dt <= 0 or dt > max_gap_s:
        return None
    return delta / dt


class NormalQuantile:
    """A p90 of admitted rates; `value` is None until enough samples were seen."""

    def __init__(self, reservoir: int = RESERVOIR, warmup: int = WARMUP_SAMPLES) -> None:
        self._rates: deque[float] = deque(maxlen=reservoir)
        self._warmup = warmup
        self._cached: float | None = None
        self._dirty = False

    def reset(self) -> None:
        self._rates.clear()
        self._cached = None
        self._dirty = False

    @property
    def count(self) -> int:
        return len(self._rates)

    @property
    def value(self) -> float | None:
        if len(self._rates) < self._warmup:
            return None
        if self._dirty or self._cached is None:
            ordered = sorted(self._rates)
            self._cached = ordered[min(len(ordered) - 1, int(QUANTILE * len(ordered)))]
            self._dirty = False
        return self._cached

    def ratio(self, rate: float) -> float | None:
        """`rate` as a share of the normal (None while the normal is unknown or zero)."""
        normal = self.value
        if normal is None or normal <= 0:
            return None
        return rate / normal

    def add(self, rate: float) -> None:
        """Learn from `rate`; the caller keeps suspect samples out (see `ADMIT_RATIO`)."""
        self._rates.append(rate)
        self._dirty = True
