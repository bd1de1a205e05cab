"""Sample in the background, serve the latest sample: a scrape never waits for a source.

The sampler thread runs the console's own tick (`MachineBackend.tick`: the GPU probe, vLLM's
/metrics, the log, the Windows side, the live session's diagnosis) once per interval and
stores what the core makes of it (`core.exposition`). A scrape only turns the stored series
into Prometheus text, so a hung NVML call or a vLLM that stopped answering delays samples,
never the answer; `vramtop_last_sample_timestamp_seconds` shows how old the numbers are.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

from prometheus_client import ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import CollectorRegistry

from vramtop import __version__
from vramtop.core.adaptive_words import AdaptiveState
from vramtop.core.exposition import ExportState, series_for, tally
from vramtop.core.metric_list import COUNTER, HISTOGRAM, SPECS, MetricSpec
from vramtop.core.model import Sample
from vramtop.core.series import Series
from vramtop.core.step_report import (
    PhaseHistogram,
    StepCounts,
    count_steps,
    latest_steps,
    observe_steps,
)
from vramtop.core.supervision_series import GuardView
from vramtop.machines.headless_runner import Runner, TickNews
from vramtop.machines.interface import FrameSource
from vramtop.supervisor.actor import guard_holder
from vramtop.supervisor.step_phases import StepTimeline, recorded_steps

log = logging.getLogger(__name__)


def guard_view(profile: str | None, adaptive: AdaptiveState | None) -> GuardView | None:
    """The profile's guard as the console sees it: a guard acts for the profile while it
    holds the guard lock (`guard_holder`), whose file says whether it acts on its own;
    `adaptive` is the adaptive guard's state the backend's tick read. None without a profile,
    or when the lock cannot be read (unknown, never "no guard")."""
    if profile is None:
        return None
    try:
        holder = guard_holder(profile)
    except OSError:
        return None
    if holder is None:
        return GuardView(running=False)
    return GuardView(running=True, auto_remedy=holder["auto_remedy"], adaptive=adaptive)


def failed_sources(sample: Sample) -> dict[str, str]:
    """The sources that failed in this sample (`vramtop_scrape_errors_total`'s `source`), each
    with the reason in the user's words."""
    failed = {}
    if sample.gpu.error is not None:
        failed["gpu"] = f"the GPU cannot be read: {sample.gpu.error}"
    server = sample.server
    if server is not None and (not server.reachable or server.stale):
        failed["server"] = (
            f"the vLLM server at {server.url} does not answer: {server.error or 'no answer'}"
        )
    if sample.windows is not None and sample.windows.error is not None:
        failed["windows"] = f"Windows' GPU counters cannot be read: {sample.windows.error}"
    return failed


class Exporter:
    """A prometheus_client collector over a backend sampled by a thread of its own."""

    def __init__(
        self,
        backend: FrameSource,
        *,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        version: str = __version__,
        say: Callable[[str], None] = lambda line: None,
    ) -> None:
        self._backend = backend
        self._clock = clock
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._state = ExportState(version=version)
        self._errors: Counter[str] = Counter()
        self._say = say
        self._failing: set[str] = set()
        self._desktop_peak: int | None = None  # as the console keeps it, for the what-if
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # The headless runner the guard and `record` tick on too: one tick, with the
        # session's events new since the previous one, every interval.
        self._runner = Runner(backend, interval_s=interval_s, clock=monotonic, sleep=self._wait)
        self._woke = monotonic()  # when the sampler last woke: its sample's duration counts from it
        # The profile's steps written to its timeline from now on (the phases' histogram).
        profile = backend.profile_name
        self._steps = None if profile is None else StepTimeline(profile, since=clock())
        # The latest step of each kind before that, from the timeline as it is now.
        if profile is not None:
            latest = latest_steps({}, recorded_steps(profile))
            self._state = replace(self._state, step_counts=StepCounts.start(latest))

    # --- sampling (the sampler thread) -----------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="vramtop-export", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> bool:
        """Ask the sampler to stop; False when it is still stuck in a source after `timeout_s`
        (it is a daemon thread: it does not keep the process alive)."""
        self._stop.set()
        if self._thread is None:
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _run(self) -> None:
        # A failing tick is counted and the next one tried, for as long as the exporter serves.
        self._woke = self._monotonic()
        self._runner.run(self._stop.is_set, self._store, on_error=self._failed, max_failures=None)

    def _wait(self, seconds: float) -> None:
        self._stop.wait(seconds)  # a stop ends the wait at once
        self._woke = self._monotonic()

    def sample_once(self) -> None:
        """One tick of the backend, stored as the exposition's new state. Never raises: a
        failing tick is counted as the sampler's error and the previous sample stays."""
        self._woke = self._monotonic()
        try:
            self._store(self._runner.tick())
        except Exception as exc:
            log.exception("vramtop export: a sample failed")
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        """A tick that raised, counted as the sampler's error (the runner logs it)."""
        with self._lock:
            self._errors["sampler"] += 1
            self._state = replace(self._state, errors=dict(self._errors))

    def _store(self, news: TickNews) -> None:
        """A tick's sample, findings and new events as the exposition's new state."""
        frame = news.frame
        sample, findings = frame.sample, frame.findings
        spill, outside_budget = frame.spill, frame.outside_budget_bytes
        failed = failed_sources(sample)
        self._tell_changes(failed)
        desktop = sample.split.desktop_bytes if sample.split else None
        if desktop is not None:
            self._desktop_peak = max(desktop, self._desktop_peak or 0)
        counts = tally(self._state.counts, sample, news.new_events)
        new_steps = self._steps.new_steps() if self._steps is not None else []
        guard = guard_view(self._backend.profile_name, frame.adaptive)
        with self._lock:
            self._errors.update(failed.keys())
            self._state = replace(
                self._state,
                sample=sample,
                counts=counts,
                open_findings=findings,
                throughput=frame.throughput,
                spill=spill,
                samples=self._state.samples + 1,
                errors=dict(self._errors),
                sampled_at=self._clock(),
                sample_duration_s=self._monotonic() - self._woke,
                desktop_peak_bytes=self._desktop_peak,
                outside_budget_bytes=outside_budget,
                steps=observe_steps(self._state.steps, new_steps),
                step_counts=None
                if self._state.step_counts is None
                else count_steps(self._state.step_counts, new_steps),
                guard=guard,
                under_way=frame.under_way,
            )

    def _tell_changes(self, failed: dict[str, str]) -> None:
        """Say once when a source starts failing and once when it answers again (the counter
        says how often; a line a second would drown the journal)."""
        for source in sorted(failed.keys() - self._failing):
            self._say(f"{failed[source]} (still serving; the metrics say so)")
        for source in sorted(self._failing - failed.keys()):
            self._say(f"{source} answers again")
        self._failing = set(failed)

    # --- serving (the HTTP server's threads) ------------------------------------------------
    def state(self) -> ExportState:
        with self._lock:
            return self._state

    def collect(self) -> Iterator[Metric]:
        state = self.state()
        yield from families(series_for(state), state.steps)

    def registry(self) -> CollectorRegistry:
        """A registry holding this exporter and the exporter process's own `process_*`
        metrics (CPU seconds, resident memory, open file descriptors, start time)."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        ProcessCollector(registry=registry)
        return registry


def families(
    series: list[Series], steps: Mapping[str, PhaseHistogram] | None = None
) -> Iterator[Metric]:
    """The series as prometheus_client metric families, in the metric list's order, with
    the steps' phases as the histogram (absent before the first step)."""
    by_name: dict[str, list[Series]] = {}
    for one in series:
        by_name.setdefault(one.name, []).append(one)
    for name, spec in SPECS.items():
        if spec.kind == HISTOGRAM:
            if steps:
                yield _histogram(spec, steps)
            continue
        members = by_name.get(name)
        if not members:
            continue
        family: GaugeMetricFamily | CounterMetricFamily
        if spec.kind == COUNTER:
            family = CounterMetricFamily(name, spec.help, labels=spec.labels)
        else:
            family = GaugeMetricFamily(name, spec.help, labels=spec.labels)
        for one in members:
            labels = dict(one.labels)
            family.add_metric([labels[label] for label in spec.labels], one.value)
        yield family


def _histogram(spec: MetricSpec, steps: Mapping[str, PhaseHistogram]) -> Metric:
    family = HistogramMetricFamily(spec.name, spec.help, labels=spec.labels)
    for phase, histogram in sorted(steps.items()):
        # Written as prometheus_client's own histograms write their bounds ("60.0", "+Inf").
        buckets = [
            ("+Inf" if math.isinf(le) else repr(le), count) for le, count in histogram.cumulative()
        ]
        family.add_metric([phase], buckets, histogram.total_s)
    return family
