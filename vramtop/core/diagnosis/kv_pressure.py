"""kv_pressure: the KV cache is nearly full and requests wait or are preempted.

When it opens and closes (`KvWatch`), what the finding says, and the three ways to give each
request more of the pool: a larger budget (when the desktop can spare it), fewer sequences,
shorter requests.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from vramtop.core import sample_facts as read
from vramtop.core.budget import kv_cost, largest_util_for_desktop
from vramtop.core.diagnosis.book import FindingBook
from vramtop.core.diagnosis.rates import counter_delta
from vramtop.core.diagnosis.thresholds import (
    DESKTOP_MARGIN_BYTES,
    KV_CLEAR,
    KV_HIGH,
    PREEMPTION_RECENT_S,
    THROTTLE_OPEN,
    THROTTLE_WINDOW,
)
from vramtop.core.findings import (
    COUNT,
    Evidence,
    Facts,
    Kind,
    Ladder,
    Remedy,
    RemedyAction,
    RemedyOption,
    Report,
    Severity,
)
from vramtop.core.model import Sample, ServerMetrics, ServerState


class KvWatch:
    """Open while the KV cache is nearly full and requests wait or were preempted lately, on
    enough of the last samples; close once none is and usage fell below `KV_CLEAR`."""

    def __init__(self, book: FindingBook) -> None:
        self._book = book
        self.new_epoch()

    def new_epoch(self) -> None:
        self._window: deque[bool] = deque(maxlen=THROTTLE_WINDOW)
        self._last_preemption_t: float | None = None

    def check(
        self,
        prev: Sample | None,
        s: Sample,
        desktop_peak: int | None,
        outside_budget: int | None,
    ) -> None:
        m = read.metrics(s)
        if m is None or read.state(s) not in (ServerState.RUNNING, None):
            return
        pm = read.metrics(prev) if prev is not None else None
        if counter_delta(pm.preemptions_total if pm else None, m.preemptions_total):
            self._last_preemption_t = s.t
        preempting = (
            self._last_preemption_t is not None
            and s.t - self._last_preemption_t <= PREEMPTION_RECENT_S
        )
        waiting = bool(m.requests_waiting)
        kv = m.kv_cache_usage
        self._window.append(kv is not None and kv >= KV_HIGH and (preempting or waiting))
        if self._book.is_open(Kind.KV_PRESSURE) and not any(self._window) and (kv or 0) < KV_CLEAR:
            self._book.close(Kind.KV_PRESSURE, s.t)
        elif sum(self._window) >= THROTTLE_OPEN and kv is not None:
            report = kv_report(s, m, kv, preempting, desktop_peak, outside_budget)
            self._book.set(Kind.KV_PRESSURE, s.t, report)


@dataclass(frozen=True)
class KvFacts(Facts):
    """KV pressure's evidence (the session format's keys, in order)."""

    kv_cache_usage: float
    requests_running: float | None = field(metadata=COUNT)
    requests_waiting: float | None = field(metadata=COUNT)
    preemptions_total: float | None = field(metadata=COUNT)
    preempting: bool
    kv_cache_tokens: int | None


def kv_report(
    s: Sample,
    m: ServerMetrics,
    kv: float,
    preempting: bool,
    desktop_peak: int | None,
    outside_budget: int | None,
) -> Report:
    """What the finding says: the pool's fill, and the options that give each request more."""
    facts = KvFacts(
        kv_cache_usage=kv,
        requests_running=m.requests_running,
        requests_waiting=m.requests_waiting,
        preemptions_total=m.preemptions_total,
        preempting=preempting,
        kv_cache_tokens=m.cache.kv_cache_size_tokens,
    )
    why = "requests are being preempted" if preempting else "requests are waiting"
    options = _options(s, m, desktop_peak, outside_budget)
    return Report(
        severity=Severity.WARNING,
        summary=f"The KV cache is {kv:.0%} full and {why}: the pool is too small for this load.",
        evidence=Evidence.of(facts),
        ladder=Ladder(
            observed=(f"KV cache usage {kv:.1%}", why),
            inferred=("the KV pool is the bottleneck",),
        ),
        remedy=Remedy(action=RemedyAction.RELAUNCH, options=tuple(options)),
    )


def _options(
    s: Sample, m: ServerMetrics, desktop_peak: int | None, outside_budget: int | None
) -> list[RemedyOption]:
    info = s.info
    options: list[RemedyOption] = []
    larger = _larger_budget(s, m, desktop_peak, outside_budget)
    if larger is not None:
        options.append(larger)
    seqs = read.max_num_seqs(info.argv if info else ())
    options.append(
        RemedyOption(
            "--max-num-seqs",
            max(1, seqs // 2) if seqs else None,
            "fewer sequences share the pool",
        )
    )
    max_len = info.max_model_len if info else None
    options.append(
        RemedyOption(
            "--max-model-len",
            max_len // 2 if max_len else None,
            "shorter requests hold fewer blocks",
        )
    )
    return options


def _larger_budget(
    s: Sample, m: ServerMetrics, desktop_peak: int | None, outside_budget: int | None
) -> RemedyOption | None:
    """A larger `--gpu-memory-utilization` that still leaves the desktop its peak, if any."""
    device = read.primary(s)
    util_now = read.util(s)
    if device is None or util_now is None:
        return None
    need = (desktop_peak or 0) + DESKTOP_MARGIN_BYTES
    up = largest_util_for_desktop(device.total_bytes, need, outside_budget or 0)
    if up > util_now + 0.005:
        cost = kv_cost(
            device.total_bytes,
            util_now,
            up,
            m.cache.kv_cache_memory_bytes,
            m.cache.kv_cache_size_tokens,
        )
        return RemedyOption("--gpu-memory-utilization", up, cost=cost)
    return None
