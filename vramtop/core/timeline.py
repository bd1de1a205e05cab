"""Bounded history of samples, and the rates derived from vLLM's cumulative counters.

Recent samples are kept whole (the console's sparklines and the diagnosis read them). Older
ones are folded into coarse points (one per `coarse_step_s`), so hours at 1 Hz stay small:
with the defaults, 15 minutes of full samples plus 24 hours of 10-second points.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from vramtop.core.model import Rates, Sample, ServerMetrics

# Rates are taken over this many seconds of samples: long enough that the jitter of one
# scrape does not show, short enough that a collapse shows within a few seconds.
RATE_WINDOW_S = 5.0
# Readings closer than this give no rate: a counter read twice 60 ms apart (a tick right after
# an action's) turns the jitter of one scrape into thousands of tokens/s.
MIN_RATE_SPAN_S = 1.0


@dataclass(frozen=True)
class CoarsePoint:
    """Averages of one coarse step of old samples (None where no sample knew the value)."""

    t: float
    generation_tps: float | None
    prompt_tps: float | None
    kv_cache_usage: float | None
    used_bytes: int | None
    server_bytes: int | None
    desktop_bytes: int | None


def window_rate(points: Sequence[tuple[float, float | None]]) -> float | None:
    """Rate of a cumulative counter over a window of `(t, value)` points, oldest first.

    (The diagnosis's `baseline.counter_rate` is different on purpose: pairwise, and unknown
    across a reset or a long gap, so that a restart never teaches its baseline.)

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
    """Rates at `latest`, from the samples of the last `window_s` seconds before it."""
    window = [s for s in history if latest.t - window_s <= s.t < latest.t]
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
    """Samples in time order, bounded in memory however long vramtop runs."""

    def __init__(
        self,
        recent_s: float = 900.0,
        coarse_step_s: float = 10.0,
        coarse_keep: int = 8640,
    ) -> None:
        self.recent_s = recent_s
        self.coarse_step_s = coarse_step_s
        self._recent: deque[Sample] = deque()
        self._coarse: deque[CoarsePoint] = deque(maxlen=coarse_keep)
        self._folding: list[Sample] = []

    def add(self, sample: Sample) -> Sample:
        """Append a sample, filling in its rates; returns the sample as stored."""
        if sample.rates == Rates():
            sample = replace(sample, rates=rates_for(self._recent, sample))
        self._recent.append(sample)
        while self._recent and self._recent[0].t < sample.t - self.recent_s:
            self._fold(self._recent.popleft())
        return sample

    @property
    def latest(self) -> Sample | None:
        return self._recent[-1] if self._recent else None

    def recent(self, seconds: float | None = None) -> list[Sample]:
        """Full samples of the last `seconds` (all kept ones when None), oldest first."""
        if seconds is None or not self._recent:
            return list(self._recent)
        start = self._recent[-1].t - seconds
        return [s for s in self._recent if s.t >= start]

    def coarse(self) -> list[CoarsePoint]:
        """Downsampled points older than the recent window, oldest first."""
        return list(self._coarse)

    def __len__(self) -> int:
        return len(self._recent) + len(self._coarse)

    def _fold(self, sample: Sample) -> None:
        if self._folding and sample.t - self._folding[0].t >= self.coarse_step_s:
            self._coarse.append(_average(self._folding))
            self._folding = []
        self._folding.append(sample)


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _mean_int(values: Iterable[int | None]) -> int | None:
    mean = _mean(values)
    return None if mean is None else round(mean)


def _average(samples: Sequence[Sample]) -> CoarsePoint:
    def used(s: Sample) -> int | None:
        return s.gpu.devices[0].used_bytes if s.gpu.devices else None

    return CoarsePoint(
        t=samples[0].t,
        generation_tps=_mean(s.rates.generation_tps for s in samples),
        prompt_tps=_mean(s.rates.prompt_tps for s in samples),
        kv_cache_usage=_mean(
            s.server.metrics.kv_cache_usage if s.server and s.server.metrics else None
            for s in samples
        ),
        used_bytes=_mean_int(used(s) for s in samples),
        server_bytes=_mean_int(s.split.server_bytes if s.split else None for s in samples),
        desktop_bytes=_mean_int(s.split.desktop_bytes if s.split else None for s in samples),
    )
