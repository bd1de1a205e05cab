"""The rates derived from vLLM's cumulative counters, over the last few seconds of samples.

`CounterWindow` keeps what those rates need and nothing else: the counters' readings of the last
few seconds (not the samples, not the rates). The rate's history has one owner each for what
it is read for: the diagnosis keeps the rates it judged (`Diagnoser._points`), the console's
throughput panel what it draws.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise
from typing import NamedTuple

from vramtop.core.model import Rates, Sample

# Rates are taken over this many seconds of samples: long enough that the jitter of one
# scrape does not show, short enough that a collapse shows within a few seconds.
RATE_WINDOW_S = 5.0
# Readings closer than this give no rate: a counter read twice 60 ms apart (a tick right after
# an action's) turns the jitter of one scrape into thousands of tokens/s.
MIN_RATE_SPAN_S = 1.0


def window_rate(points: Sequence[tuple[float, float | None]]) -> float | None:
    """Rate of a cumulative counter over a window of `(t, value)` points, oldest first.

    (The diagnosis's `rates.counter_rate` is different on purpose: pairwise, and unknown
    across a reset or a long gap, so that a restart never teaches its normal rate.)

    A value lower than the one before it means the counter was reset (the server restarted):
    the new value counts as the increase since the reset. Unknown values are skipped. Points
    spanning less than `MIN_RATE_SPAN_S` give None.
    """
    known = [(t, v) for t, v in points if v is not None]
    if len(known) < 2:
        return None
    span = known[-1][0] - known[0][0]
    if span < MIN_RATE_SPAN_S:
        return None
    increase = 0.0
    for (_, before), (_, after) in pairwise(known):
        increase += after - before if after >= before else after
    return increase / span


class Reading(NamedTuple):
    """One sample's counters, as a rate reads them (None: unknown, or the server not read)."""

    t: float
    generation: float | None
    prompt: float | None
    preemptions: float | None


def reading(sample: Sample) -> Reading:
    server = sample.server
    if server is None or server.metrics is None or server.stale or not server.reachable:
        return Reading(sample.t, None, None, None)
    m = server.metrics
    return Reading(sample.t, m.generation_tokens_total, m.prompt_tokens_total, m.preemptions_total)


def rates_for(
    history: Sequence[Reading], latest: Reading, window_s: float = RATE_WINDOW_S
) -> Rates:
    """Rates at `latest`, from the readings of the last `window_s` seconds before it; where
    none is that recent (samples `window_s` or more apart: `--interval 5`, `interval_s = 10`),
    from the one before it, so that any interval gives a rate over its one gap."""
    window = [r for r in history if latest.t - window_s <= r.t < latest.t]
    if not window:
        window = [r for r in history if r.t < latest.t][-1:]
    window.append(latest)
    return Rates(
        generation_tps=window_rate([(r.t, r.generation) for r in window]),
        prompt_tps=window_rate([(r.t, r.prompt) for r in window]),
        preemptions_per_s=window_rate([(r.t, r.preemptions) for r in window]),
    )


class CounterWindow:
    """The counters' readings of the last `window_s` seconds: each new sample gets its rates
    from them.

    Only the rate window is kept (memory stays flat however long vramtop runs), and the latest
    sample as stored (the headroom's live terms read it).
    """

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self.window_s = window_s
        self._readings: deque[Reading] = deque()
        self._latest: Sample | None = None

    def add(self, sample: Sample) -> Sample:
        """Append a sample, filling in its rates; returns the sample as stored."""
        now = reading(sample)
        if sample.rates == Rates():
            sample = replace(sample, rates=rates_for(self._readings, now, self.window_s))
        self._readings.append(now)
        self._latest = sample
        # The newest reading before the window is kept too: the next rate's, where no other
        # falls within its window.
        while len(self._readings) > 1 and self._readings[1].t < sample.t - self.window_s:
            self._readings.popleft()
        return sample

    @property
    def latest(self) -> Sample | None:
        return self._latest

    def __len__(self) -> int:
        return len(self._readings)
