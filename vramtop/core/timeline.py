"""The rates derived from vLLM's cumulative counters, over the last few seconds of samples.

`Timeline` keeps just those seconds: the console keeps its own history for what it draws,
the diagnosis its own for what it decides.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import pairwise

from vramtop.core.model import Rates, Sample, ServerMetrics

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


def rates_for(history: Sequence[Sample], latest: Sample, window_s: float = RATE_WINDOW_S) -> Rates:
    """Rates at `latest`, from the samples of the last `window_s` seconds before it; where
    none is that recent (samples `window_s` or more apart: `--interval 5`, `interval_s = 10`),
    from the one before it, so that any interval gives a rate over its one gap."""
    window = [s for s in history if latest.t - window_s <= s.t < latest.t]
    if not window:
        window = [s for s in history if s.t < latest.t][-1:]
    window.append(latest)

    def series(field: Callable[[ServerMetrics], float | None]) -> list[tuple[float, float | None]]:
        return [(s.t, _metric(s, field)) for s in window]

    return Rates(
        generation_tps=window_rate(series(lambda m: m.generation_tokens_total)),
        prompt_tps=window_rate(series(lambda m: m.prompt_tokens_total)),
        preemptions_per_s=window_rate(series(lambda m: m.preemptions_total)),
    )


def _metric(sample: Sample, field: Callable[[ServerMetrics], float | None]) -> float | None:
    server = sample.server
    if server is None or server.metrics is None or server.stale or not server.reachable:
        return None
    return field(server.metrics)


class Timeline:
    """The latest samples, as many as a rate needs: each new sample gets its rates from them.

    Only the rate window is kept (memory stays flat however long vramtop runs); the history
    the console draws and the diagnosis reads is kept where it is read.
    """

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self.window_s = window_s
        self._recent: deque[Sample] = deque()

    def add(self, sample: Sample) -> Sample:
        """Append a sample, filling in its rates; returns the sample as stored."""
        if sample.rates == Rates():
            sample = replace(sample, rates=rates_for(self._recent, sample, self.window_s))
        self._recent.append(sample)
        # The newest sample before the window is kept too: the next rate's, where no other
        # falls within its window.
        while len(self._recent) > 1 and self._recent[1].t < sample.t - self.window_s:
            self._recent.popleft()
        return sample

    @property
    def latest(self) -> Sample | None:
        return self._recent[-1] if self._recent else None

    def __len__(self) -> int:
        return len(self._recent)
