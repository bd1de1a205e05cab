"""Findings: what is wrong, the numbers that show it, what rules out the rest, what to do.

Pure: samples and events go in (time comes with them), `Finding` values come out. The same
`Diagnoser` runs live in the console and over a recorded session (`vramtop diagnose`).

Kinds (fixed vocabulary, see the session format): vram_contention, kv_pressure,
gpu_throttling, startup_out_of_memory, server_crashed, server_not_answering, vram_slowdown,
launch_failed. Every rule opens on several samples and closes on several, so a noisy signal
does not make a finding flap.

This module holds the collapse's rules (when vram_contention opens and closes) and the window
of judged points they read (`_points`: the one history of the rate judged against its normal;
the console's sparkline keeps its own drawing, the sampler's `CounterWindow` only the counter
readings a displayed rate needs). Each point is measured, and the normal taught, by
`meter.RateMeter`; the other kinds' rules are with their reports (`server_down.ServerWatch`,
`kv_pressure.KvWatch`, `throttling.ThrottleWatch`, `slowdown.SlowdownWatch`, which judges the
collapse's seconds against the same normal); what a collapse's finding says is `contention`
and `memory_evidence`, the budget it offers `relaunch`; findings are kept in `book`, the
thresholds are `thresholds`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import replace

from vramtop.core import sample_facts as read
from vramtop.core.diagnosis.book import FindingBook
from vramtop.core.diagnosis.card_evidence import CardWatch, cite_card
from vramtop.core.diagnosis.collapse import (
    Collapse,
    Point,
    Squeeze,
    collapse_report,
)
from vramtop.core.diagnosis.desktop import DesktopWatch
from vramtop.core.diagnosis.kv_pressure import KvWatch
from vramtop.core.diagnosis.memory_evidence import memory_evidence, memory_report, squeeze_in_memory
from vramtop.core.diagnosis.meter import RateMeter
from vramtop.core.diagnosis.normal_rate import (
    PER_REQUEST_PREFILL,
    NormalRate,
)
from vramtop.core.diagnosis.server_down import ServerWatch
from vramtop.core.diagnosis.slowdown import (
    Slowdown,
    SlowdownWatch,
    memory_squeezes,
    slowdown_report,
)
from vramtop.core.diagnosis.thresholds import (
    CARD_FULL,
    CLOSE_COUNT,
    CORROBORATED_COUNT,
    CORROBORATED_WINDOW,
    DESKTOP_GROWTH_BYTES,
    KV_LOW,
    OPEN_COUNT,
    OPEN_WINDOW,
    RELEARN_SAMPLES,
    SLOWDOWN_RATIO,
    SLOWDOWN_REASONS,
    WINDOW,
)
from vramtop.core.diagnosis.throttling import ThrottleWatch
from vramtop.core.diagnosis.throughput import ThroughputView, ThroughputWindow
from vramtop.core.findings import Finding, FindingChange, Kind
from vramtop.core.json_types import JsonValue
from vramtop.core.model import GpuDevice, Sample, ServerState
from vramtop.core.server_events import EventName
from vramtop.core.windows.spill import SpillEvidence, SpillTracker


class Diagnoser:
    """Feeds on samples and events in time order; keeps open and closed findings.

    `remembered`: a normal rate from an earlier run of the same server (see `remember`).
    """

    def __init__(self, remembered: NormalRate | None = None) -> None:
        self._meter = RateMeter(remembered)  # the normal rate, and each point judged by it
        self._book = FindingBook()
        self._server_watch = ServerWatch(self._book)
        self._throttle = ThrottleWatch(self._book)
        self._kv = KvWatch(self._book)
        self._slowdown = SlowdownWatch(self._book)
        self._prev: Sample | None = None
        self._desktop = DesktopWatch()
        self._card = CardWatch()  # what the card said: PCIe RX, WSL2's residency failures
        self._handlers = self._event_handlers()
        self._throughput = ThroughputWindow()  # each sample's throughput view
        self._new_epoch()

    # --- epochs: one per server start ---------------------------------------------------
    def _new_epoch(self) -> None:
        self._meter.new_epoch()
        self._contradicted = 0
        self._points: deque[Point] = deque(maxlen=WINDOW)
        self._memory_window: deque[bool] = deque(maxlen=WINDOW)
        self._desktop.new_epoch()
        self._server_watch.new_epoch()
        self._kv.new_epoch()
        self._throttle.new_epoch()
        self._slowdown.new_epoch()
        # WSL2: the Windows side's record of the VM's shared (system-memory) GPU usage. A
        # restart frees any spill, so its baseline starts again with each server.
        self._spill = SpillTracker()
        # AMD: the server's buffers in GTT, the same evidence seen from the driver's side.
        self._gtt = SpillTracker()
        self._card.new_epoch()

    # --- public API ------------------------------------------------------------------------
    def open_findings(self) -> list[Finding]:
        return self._book.open_findings()

    def all_findings(self) -> list[Finding]:
        """Closed and open findings, in the order they were first seen."""
        return self._book.all_findings()

    @property
    def outside_budget_bytes(self) -> int | None:
        """What the server holds beyond its budget, last measured while uncontended (None:
        not measured); the figure every budget's desktop headroom is counted with."""
        return self._desktop.outside_budget

    @property
    def desktop_at_start(self) -> int | None:
        """The desktop's share when this server started (its first running sample; None:
        not seen): what it held when vLLM's checks last passed at these flags."""
        return self._desktop.at_start

    def normal_generation_tps(self) -> float | None:
        """The total generation rate the running requests normally reach (None: no normal
        rate yet); see `normal_rate` for the per-request figure and where it came from."""
        normal = self.normal_rate()
        return normal.expected_generation_tps(self._meter.running) if normal is not None else None

    @property
    def throughput(self) -> ThroughputView | None:
        """The latest sample's rates against the normal, as every reader shows them (None
        before the first sample)."""
        return self._throughput.view

    def _view(self, s: Sample, point: Point | None) -> None:
        """The throughput view of `s`, made once: what `point` was judged against, before the
        normal learns from it."""
        normal = self.normal_rate()
        reference = (
            self._meter.reference(point.measure, point.running) if point is not None else None
        )
        expected = normal.expected_generation_tps(self._meter.running) if normal else None
        self._throughput.add(s, point, normal, reference, expected)

    def normal_rate(self) -> NormalRate | None:
        """The normal decode speed compared with now: learned on this run, or remembered
        from an earlier one (its `source` says which). None: nothing to compare with yet."""
        return self._meter.current()

    @property
    def decode_key(self) -> str | None:
        """What the normal rate belongs to (see `normal_rate.decode_key`), once known."""
        return self._meter.key

    def remember(self, rate: NormalRate | None) -> None:
        """Compare with `rate` (an earlier run's normal) until this run learns its own."""
        self._meter.normal.remembered = rate

    def spill_evidence(self) -> SpillEvidence | None:
        """WSL2: the VM's shared memory risen past the spill threshold since the server's
        start (None: no spill seen, or the Windows side is not watched)."""
        return self._spill.spill_evidence()

    def take_changes(self) -> list[FindingChange]:
        """Findings opened or closed since the last call (for a banner or a `finding` event)."""
        return self._book.take_changes()

    def feed_event(
        self, t: float, event: str, detail: Mapping[str, JsonValue] | None = None
    ) -> None:
        """One lifecycle event (a name of the session format; others, and `finding`, say
        nothing to the diagnosis)."""
        name = _EVENT_NAMES.get(event)
        handler = self._handlers.get(name) if name is not None else None
        if handler is not None:
            handler(t, detail or {})

    # --- events ----------------------------------------------------------------------------
    def _event_handlers(self) -> dict[EventName, Callable[[float, Mapping[str, JsonValue]], None]]:
        """What each lifecycle event does (`finding` does nothing: a recorded conclusion is not
        input)."""
        return {
            EventName.START: self._on_start,
            EventName.RESTART: self._on_planned_start,
            EventName.RELAUNCH: self._on_planned_start,
            EventName.STOP: self._on_stop,
            EventName.READY: self._on_ready,
            EventName.LOG: self._on_log,
            EventName.EXIT: self._on_exit,
        }

    def _on_ready(self, t: float, _: Mapping[str, JsonValue]) -> None:
        self._server_watch.ready(t)

    def _on_log(self, t: float, detail: Mapping[str, JsonValue]) -> None:
        self._server_watch.check_oom_text(t, str(detail.get("line", "")))

    def _on_start(self, t: float, _: Mapping[str, JsonValue]) -> None:
        # A fresh process: a collapse, a slowdown, a KV squeeze or a crash of the old one is
        # over.
        for kind in _OVER_AT_START:
            self._book.close(kind, t)
        self._new_epoch()

    def _on_planned_start(self, t: float, detail: Mapping[str, JsonValue]) -> None:
        self._server_watch.planned()
        self._on_start(t, detail)

    def _on_stop(self, t: float, _: Mapping[str, JsonValue]) -> None:
        self._server_watch.planned()
        for kind in (Kind.VRAM_CONTENTION, Kind.VRAM_SLOWDOWN, Kind.KV_PRESSURE):
            self._book.close(kind, t)

    def _on_exit(self, t: float, detail: Mapping[str, JsonValue]) -> None:
        self._book.close(Kind.VRAM_SLOWDOWN, t)  # no server, no slowdown
        self._server_watch.on_exit(t, detail)

    def feed_sample(self, s: Sample) -> None:
        prev, self._prev = self._prev, s
        if self._meter.track_key(s):
            self._contradicted = 0
        if s.windows is not None:
            self._spill.add(s.windows, s.t)
        if s.split is not None and s.split.server_gtt_bytes is not None:
            self._gtt.add_point(s.t, s.split.server_bytes or 0, s.split.server_gtt_bytes)
        device = read.primary(s)
        state = read.state(s)
        self._desktop.track(s, state, contended=self._book.is_open(Kind.VRAM_CONTENTION))
        self._server_watch.check_health(s, state)
        self._server_watch.check_answering(s, state)
        if s.startup is not None and s.startup.error_kind == "out_of_memory" and s.startup.error:
            self._server_watch.check_oom_text(s.t, s.startup.error)
        point = self._meter.measure(prev, s, state)
        self._view(s, point)
        normal = point is not None and point.at_normal and not self._squeezed()
        self._card.track(s, normal=normal)
        self._throttle.check(
            s.t,
            device,
            point.ratio if point is not None else None,
            point.generation_tps if point is not None else None,
        )
        self._kv.check(prev, s, self._desktop.peak, self._desktop.outside_budget)
        squeeze = self._squeeze(s, device) if point is not None else None
        judged = self._check_collapse(s, device, point, squeeze)
        # A slowdown is a fall of a third: prefill's own noise in the fallback's prefill
        # seconds is as large, so those seconds judge only the collapse.
        steady = point is None or point.measure != PER_REQUEST_PREFILL
        self._check_slowdown(s, device, state, point, judged and steady, squeeze)
        # Squeezed seconds (as this sample's rules left the findings, or as the memory shows
        # them) must not teach the normal: a long call would make its own slowdown normal and
        # the finding close while nothing changed, and a console opened in the middle of a
        # call, with no normal known, would learn the collapsed rate as the normal.
        if (
            point is not None
            and not self._squeezed()
            and not self._memory_squeezed(s, point, squeeze)
        ):
            self._meter.learn(point)

    # --- rules ---------------------------------------------------------------------------------
    def _check_collapse(
        self, s: Sample, device: GpuDevice | None, point: Point | None, squeeze: Squeeze | None
    ) -> bool:
        """The collapse's rule; True when `point` was judged against the normal (and its clocks
        were not slowed), the seconds the slowdown's rule judges too."""
        judged = False
        # A second with no normal to judge it by (its histogram saw too few tokens and the
        # fallback measure has none yet) says nothing either way: it neither opens nor closes.
        if point is not None and point.ratio is not None:
            judged = True
            if device is not None and set(device.throttle) & SLOWDOWN_REASONS:
                # Slow clocks explain a slow second: it counts neither way.
                point = replace(point, collapsed=False, at_normal=False)
                judged = False
            self._points.append(point)
        self._check_remembered(point, squeeze)
        if self._check_memory_only(s, device, point):
            return judged
        at_normal = sum(p.at_normal for p in self._points)
        if self._book.is_open(Kind.VRAM_CONTENTION) and at_normal >= CLOSE_COUNT:
            self._book.close(Kind.VRAM_CONTENTION, s.t)
            return judged
        # Only a sample with requests running can open or refresh it: old slow seconds must
        # not become a finding while idle, and an open one keeps its last numbers.
        if device is None or point is None or squeeze is None:
            return judged
        points = self._collapsed_points(s)
        if not points:
            return judged
        collapse = Collapse(
            points=points,
            normal_tps=self._meter.reference(points[-1].measure, points[-1].running) or 0.0,
            kv=squeeze.kv,
            fill=squeeze.fill,
            growth=squeeze.growth,
            normal=self.normal_rate(),
        )
        report = collapse_report(s, device, collapse, self._desktop.share(), self._any_spill())
        report = cite_card(report, self._card.evidence())  # additive: where the card said
        self._book.set(Kind.VRAM_CONTENTION, s.t, report)
        return judged

    def _check_slowdown(
        self,
        s: Sample,
        device: GpuDevice | None,
        state: ServerState | None,
        point: Point | None,
        judged: bool,
        squeeze: Squeeze | None,
    ) -> None:
        """vram_slowdown: the collapse's judged seconds under `SLOWDOWN_RATIO` of the same
        normal while the memory shows the squeeze. Never beside a collapse, which supersedes
        it, nor while slowed clocks (gpu_throttling) explain the rate."""
        superseded = self._book.is_open(Kind.VRAM_CONTENTION) or state not in (
            ServerState.RUNNING,
            None,
        )
        squeezed = memory_squeezes(s, squeeze, self._any_spill(), self._desktop.outside_budget)
        counted = judged and not self._book.is_open(Kind.GPU_THROTTLING)
        points = self._slowdown.check(s.t, point, counted, squeezed, superseded)
        if not points or device is None or squeeze is None:
            return
        last = points[-1]
        slowdown = Slowdown(
            points=points,
            judged=self._slowdown.judged_count,
            normal_tps=self._meter.reference(last.measure, last.running) or 0.0,
            squeeze=squeeze,
            normal=self.normal_rate(),
        )
        report = slowdown_report(s, device, slowdown, self._desktop.share(), self._any_spill())
        self._book.set(Kind.VRAM_SLOWDOWN, s.t, report)

    def _collapsed_points(self, s: Sample) -> list[Point]:
        """The collapsed seconds that open (or refresh) the finding: 5 of the last 6 judged,
        or 3 of the last 4 while the memory itself shows the squeeze (see
        `squeeze_in_memory`); empty when neither holds."""
        recent = list(self._points)
        for window, count, needs_memory in (
            (OPEN_WINDOW, OPEN_COUNT, False),
            (CORROBORATED_WINDOW, CORROBORATED_COUNT, True),
        ):
            points = [p for p in recent[-window:] if p.collapsed]
            if len(points) < count:
                continue
            if not needs_memory or squeeze_in_memory(
                s, self._any_spill(), self._desktop.outside_budget
            ):
                return points
        return []

    def _squeezed(self) -> bool:
        """A collapse or a slowdown is open: the desktop squeezes the server now."""
        return self._book.is_open(Kind.VRAM_CONTENTION) or self._book.is_open(Kind.VRAM_SLOWDOWN)

    def _memory_squeezed(self, s: Sample, point: Point, squeeze: Squeeze | None) -> bool:
        """The memory shows the desktop squeezing the server this second: as the collapse's
        corroborated rule reads it (spilled, or the desktop clearly past its allowance), or
        as the slowdown's rule does (`memory_squeezes`: a full card with the desktop within
        reach of its allowance) in a second under the slowdown's line (SLOWDOWN_RATIO). Such
        a second must not teach the normal, on any card: a relaunch during a call would learn
        the call's slower rate as normal and the slowdown would never be told. (A full card
        at normal speed still teaches: that is how a high budget runs.)"""
        spill, outside = self._any_spill(), self._desktop.outside_budget
        if squeeze_in_memory(s, spill, outside):
            return True
        slow = point.ratio is not None and point.ratio < SLOWDOWN_RATIO
        return slow and memory_squeezes(s, squeeze, spill, outside)

    def _any_spill(self) -> SpillEvidence | None:
        """The server's memory seen spilled: the WSL VM's shared memory, or AMD's GTT."""
        return self._spill.spill_evidence() or self._gtt.spill_evidence(source="gtt")

    def _squeeze(self, s: Sample, device: GpuDevice | None) -> Squeeze | None:
        """What shows the desktop squeezing the server (KV usage low, clocks not slowed, the
        card full or the desktop grown), or None when the card does not show it."""
        if device is None or set(device.throttle) & SLOWDOWN_REASONS:
            return None  # clocks explain a slowdown: gpu_throttling speaks instead
        m = read.metrics(s)
        kv = m.kv_cache_usage if m else None
        if kv is not None and kv > KV_LOW:
            return None
        fill = device.used_bytes / device.total_bytes if device.total_bytes else 0.0
        desktop = read.desktop_bytes(s)
        growth = (
            desktop - self._desktop.at_start
            if desktop is not None and self._desktop.at_start is not None
            else None
        )
        if fill < CARD_FULL and (growth is None or growth < DESKTOP_GROWTH_BYTES):
            return None
        return Squeeze(kv=kv, fill=fill, growth=growth)

    def _check_remembered(self, point: Point | None, squeeze: Squeeze | None) -> None:
        """A remembered normal that running seconds contradict for long while nothing
        squeezes the server was wrong for this run (a new driver, longer contexts): forget it
        and learn the normal again."""
        if point is None or point.ratio is None or self._meter.normal.remembered is None:
            return
        if point.at_normal or squeeze is not None or self._book.is_open(Kind.VRAM_CONTENTION):
            self._contradicted = 0 if point.at_normal else self._contradicted
            return
        self._contradicted += 1
        if self._contradicted >= RELEARN_SAMPLES:
            self._meter.normal.forget_remembered()
            self._contradicted = 0

    def _check_memory_only(self, s: Sample, device: GpuDevice | None, point: Point | None) -> bool:
        """With no normal rate at all, the memory alone can show the squeeze: the Windows
        side (the desktop's programs hold more than the budget leaves them and part of the WSL
        VM's memory is in system memory) or a per-process split (the desktop holds what the
        budget kept for the server). True while that rule owns the finding."""
        current = self._book.get(Kind.VRAM_CONTENTION)
        memory_only = current is not None and current.confidence is not None
        if point is None or device is None:
            return memory_only
        if not memory_only and self.normal_rate() is not None:
            return False  # a normal rate is known: the rate rule decides
        evidence = memory_evidence(s, self._any_spill(), self._desktop.outside_budget)
        self._memory_window.append(evidence is not None)
        if memory_only and not any(list(self._memory_window)[-OPEN_WINDOW:]):
            self._book.close(Kind.VRAM_CONTENTION, s.t)
            return True
        if evidence is not None and sum(list(self._memory_window)[-OPEN_WINDOW:]) >= OPEN_COUNT:
            report = memory_report(s, device, evidence, self._desktop.share())
            report = cite_card(report, self._card.evidence())
            self._book.set(Kind.VRAM_CONTENTION, s.t, report)
            return True
        return memory_only


_EVENT_NAMES = {name.value: name for name in EventName}
# What a fresh server process ends: the old one's collapse, slowdown, KV squeeze or crash.
_OVER_AT_START = (
    Kind.VRAM_CONTENTION,
    Kind.VRAM_SLOWDOWN,
    Kind.KV_PRESSURE,
    Kind.SERVER_CRASHED,
    Kind.LAUNCH_FAILED,
)
