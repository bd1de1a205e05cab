"""Findings: what is wrong, the numbers that show it, what rules out the rest, what to do.

Pure: samples and events go in (time comes with them), `Finding` values come out. The same
`Diagnoser` runs live in the console and over a recorded session (`vramtop diagnose`).

Kinds (fixed vocabulary, see the session format): vram_contention, kv_pressure,
gpu_throttling, startup_out_of_memory, server_crashed, server_not_answering. Every rule
opens on several samples and closes on several, so a noisy signal does not make a finding
flap.

This module holds the rules (when a finding opens and closes); what each kind's finding says
is in its own module (`contention`, `kv_pressure`, `throttling`, `server_down`), the values in
`findings` and the thresholds in `diagnosis_thresholds`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from vramtop.core import sample_facts as read
from vramtop.core.baseline import ADMIT_RATIO, MAX_GAP_S, counter_delta, counter_rate
from vramtop.core.budget import TREND_WINDOW_S, growth_rate, kv_cost, largest_util_for_desktop
from vramtop.core.contention import Collapse, DesktopShare, Point, Squeeze, contention_report
from vramtop.core.diagnosis_thresholds import (
    CARD_FULL,
    CLOSE_COUNT,
    COLLAPSE_RATIO,
    CORROBORATED_COUNT,
    CORROBORATED_WINDOW,
    DESKTOP_GROWTH_BYTES,
    DESKTOP_MARGIN_BYTES,
    HOT_C,
    HOT_SLOW_RATIO,
    KV_CLEAR,
    KV_HIGH,
    KV_LOW,
    OPEN_COUNT,
    OPEN_WINDOW,
    PREEMPTION_RECENT_S,
    PREFILL_TPS,
    RECOVERED_RATIO,
    RELEARN_SAMPLES,
    SLOWDOWN_REASONS,
    THROTTLE_OPEN,
    THROTTLE_WINDOW,
    UNHEALTHY_SAMPLES,
    UNSEEN_DESKTOP_DEMAND_BYTES,
    WINDOW,
)
from vramtop.core.findings import (
    GPU_THROTTLING,
    KINDS,
    KV_PRESSURE,
    SERVER_CRASHED,
    SERVER_NOT_ANSWERING,
    STARTUP_OUT_OF_MEMORY,
    VRAM_CONTENTION,
    Finding,
    FindingChange,
    report_fields,
)
from vramtop.core.kv_pressure import kv_report
from vramtop.core.memory_evidence import memory_evidence, memory_report, squeeze_in_memory
from vramtop.core.model import GpuDevice, Sample, ServerState
from vramtop.core.normal_rate import (
    INTER_TOKEN_LATENCY,
    PER_REQUEST,
    NormalRate,
    NormalRateLearner,
    decode_key,
    decode_tps,
)
from vramtop.core.server_down import (
    NOT_ANSWERING_S,
    crash_report,
    not_answering_report,
    startup_oom_facts,
    startup_oom_report,
)
from vramtop.core.throttling import throttle_report
from vramtop.core.windows.spill import SpillEvidence, SpillTracker

__all__ = [
    "CARD_FULL",
    "CLOSE_COUNT",
    "COLLAPSE_RATIO",
    "CORROBORATED_COUNT",
    "CORROBORATED_WINDOW",
    "DESKTOP_GROWTH_BYTES",
    "DESKTOP_MARGIN_BYTES",
    "GPU_THROTTLING",
    "HOT_C",
    "HOT_SLOW_RATIO",
    "KINDS",
    "KV_CLEAR",
    "KV_HIGH",
    "KV_LOW",
    "KV_PRESSURE",
    "OPEN_COUNT",
    "OPEN_WINDOW",
    "PREEMPTION_RECENT_S",
    "PREFILL_TPS",
    "RECOVERED_RATIO",
    "SERVER_CRASHED",
    "SERVER_NOT_ANSWERING",
    "SLOWDOWN_REASONS",
    "STARTUP_OUT_OF_MEMORY",
    "THROTTLE_OPEN",
    "THROTTLE_WINDOW",
    "UNHEALTHY_SAMPLES",
    "UNSEEN_DESKTOP_DEMAND_BYTES",
    "VRAM_CONTENTION",
    "WINDOW",
    "Diagnoser",
    "Finding",
    "FindingChange",
    "NormalRate",
    "kv_cost",
    "largest_util_for_desktop",
    "startup_oom_facts",
]


class Diagnoser:
    """Feeds on samples and events in time order; keeps open and closed findings.

    `remembered`: a normal rate from an earlier run of the same server (see `remember`).
    """

    def __init__(self, remembered: NormalRate | None = None) -> None:
        self._normal = NormalRateLearner(remembered=remembered)
        self._key: str | None = None
        self._key_argv: tuple[str, ...] | None = None
        self._running = 1.0
        self._open: dict[str, Finding] = {}
        self._closed: list[Finding] = []
        self._changes: list[FindingChange] = []
        self._prev: Sample | None = None
        self._desktop_peak: int | None = None
        self._outside_budget: int | None = None
        self._oom_seen: set[str] = set()
        self._new_epoch()
        self._planned_exit = False

    # --- epochs: one per server start ---------------------------------------------------
    def _new_epoch(self) -> None:
        # The normal decode speed outlives a restart or relaunch (the budget only sizes the
        # KV pool): what this run learned is what the next one compares with at once.
        self._normal = NormalRateLearner(remembered=self._normal.current(self._key))
        self._contradicted = 0
        self._points: deque[Point] = deque(maxlen=WINDOW)
        self._memory_window: deque[bool] = deque(maxlen=WINDOW)
        self._desktop_at_start: int | None = None
        self._desktop_history: deque[tuple[float, int]] = deque()
        self._was_healthy = False
        self._exit_seen = False
        self._unhealthy_run = 0
        self._kv_window: deque[bool] = deque(maxlen=THROTTLE_WINDOW)
        self._last_preemption_t: float | None = None
        self._throttle_window: deque[bool] = deque(maxlen=THROTTLE_WINDOW)
        # WSL2: the Windows side's record of the VM's shared (system-memory) GPU usage. A
        # restart frees any spill, so its baseline starts again with each server.
        self._spill = SpillTracker()
        # AMD: the server's buffers in GTT, the same evidence seen from the driver's side.
        self._gtt = SpillTracker()

    # --- public API ------------------------------------------------------------------------
    def open_findings(self) -> list[Finding]:
        return sorted(self._open.values(), key=lambda f: f.first_seen_t)

    def all_findings(self) -> list[Finding]:
        """Closed and open findings, in the order they were first seen."""
        return sorted([*self._closed, *self._open.values()], key=lambda f: f.first_seen_t)

    @property
    def outside_budget_bytes(self) -> int | None:
        """What the server holds beyond its budget, last measured while uncontended (None:
        not measured); the figure every budget's desktop headroom is counted with."""
        return self._outside_budget

    def healthy_generation_tps(self) -> float | None:
        """The total generation rate the running requests normally reach (None: no normal
        rate yet); see `normal_rate` for the per-request figure and where it came from."""
        normal = self.normal_rate()
        return normal.expected_generation_tps(self._running) if normal is not None else None

    def normal_rate(self) -> NormalRate | None:
        """The normal decode speed compared with now: learned on this run, or remembered
        from an earlier one (its `source` says which). None: nothing to compare with yet."""
        return self._normal.current(self._key)

    @property
    def decode_key(self) -> str | None:
        """What the normal rate belongs to (see `normal_rate.decode_key`), once known."""
        return self._key

    def remember(self, rate: NormalRate | None) -> None:
        """Compare with `rate` (an earlier run's normal) until this run learns its own."""
        self._normal.remembered = rate

    def spill_evidence(self) -> SpillEvidence | None:
        """WSL2: the VM's shared memory risen past the spill threshold since the server's
        start (None: no spill seen, or the Windows side is not watched)."""
        return self._spill.spill_evidence()

    def take_changes(self) -> list[FindingChange]:
        """Findings opened or closed since the last call (for a banner or a `finding` event)."""
        changes, self._changes = self._changes, []
        return changes

    def feed_event(self, t: float, event: str, detail: Mapping[str, Any] | None = None) -> None:
        detail = detail or {}
        if event in ("start", "restart", "relaunch"):
            if event != "start":
                self._planned_exit = True
            # A fresh process: a collapse, a KV squeeze or a crash of the old one is over.
            for kind in (VRAM_CONTENTION, KV_PRESSURE, SERVER_CRASHED):
                self._close(kind, t)
            self._new_epoch()
        elif event == "stop":
            self._planned_exit = True
            for kind in (VRAM_CONTENTION, KV_PRESSURE):
                self._close(kind, t)
        elif event == "ready":
            self._planned_exit = False
            self._exit_seen = False
            self._close(STARTUP_OUT_OF_MEMORY, t)
            self._close(SERVER_CRASHED, t)
        elif event == "log":
            self._check_oom_text(t, str(detail.get("line", "")))
        elif event == "exit":
            self._on_exit(t, detail)

    def feed_sample(self, s: Sample) -> None:
        prev, self._prev = self._prev, s
        self._track_key(s)
        if s.windows is not None:
            self._spill.add(s.windows, s.t)
        if s.split is not None and s.split.server_gtt_bytes is not None:
            self._gtt.add_point(s.t, s.split.server_bytes or 0, s.split.server_gtt_bytes)
        device = read.primary(s)
        state = read.state(s)
        self._track_desktop(s, state)
        self._check_health(s, state)
        self._check_answering(s, state)
        if s.startup is not None and s.startup.error_kind == "out_of_memory" and s.startup.error:
            self._check_oom_text(s.t, s.startup.error)
        point = self._measure(prev, s, state)
        self._check_throttle(s, device, point)
        self._check_kv(prev, s)
        self._check_contention(s, device, point)
        if point is not None:
            self._learn(point)

    # --- bookkeeping -------------------------------------------------------------------------
    def _set(self, kind: str, t: float, **fields: Any) -> None:
        """Open `kind` at `t`, or refresh the open one with newer numbers."""
        fields = report_fields(fields)
        current = self._open.get(kind)
        if current is None:
            finding = Finding(kind=kind, first_seen_t=t, last_seen_t=t, closed_t=None, **fields)
            self._open[kind] = finding
            self._changes.append(FindingChange("opened", finding))
        else:
            self._open[kind] = replace(current, last_seen_t=t, **fields)

    def _close(self, kind: str, t: float) -> None:
        current = self._open.pop(kind, None)
        if current is not None:
            closed = replace(current, closed_t=max(t, current.last_seen_t))
            self._closed.append(closed)
            self._changes.append(FindingChange("closed", closed))

    # --- measurements --------------------------------------------------------------------------
    def _track_key(self, s: Sample) -> None:
        argv = s.info.argv if s.info is not None else ()
        if self._key is not None and argv == self._key_argv:
            return  # the same command line: the same key (read once, not every second)
        key = decode_key(s)
        if key is None:
            return
        if self._key is not None and key != self._key:
            # Another model, card or dtype: the old normal says nothing about this one.
            self._normal = NormalRateLearner()
            self._contradicted = 0
        self._key, self._key_argv = key, argv

    def _track_desktop(self, s: Sample, state: ServerState | None) -> None:
        desktop = read.desktop_bytes(s)
        if desktop is None or state not in (ServerState.RUNNING, None):
            return
        if self._desktop_at_start is None:
            self._desktop_at_start = desktop
        self._desktop_peak = max(self._desktop_peak or 0, desktop)
        history = self._desktop_history
        history.append((s.t, desktop))
        while history and history[0][0] < s.t - TREND_WINDOW_S:
            history.popleft()
        split = s.split
        if (
            split
            and split.server_bytes
            and split.budget_bytes
            and VRAM_CONTENTION not in self._open
        ):
            self._outside_budget = max(0, split.server_bytes - split.budget_bytes)

    def _measure(self, prev: Sample | None, s: Sample, state: ServerState | None) -> Point | None:
        """The rates of a sample taken while requests ran (else None). vLLM's per-token latency
        needs no request running at both ends: it counts only tokens decoded, so an interval in
        which a request ended or began is judged by it too (the per-request fallback is not:
        a request ending mid-interval lowers it)."""
        if state not in (ServerState.RUNNING, None) or prev is None:
            return None
        m, pm = read.metrics(s), read.metrics(prev)
        if m is None or pm is None:
            return None
        now, before = m.requests_running or 0.0, pm.requests_running or 0.0
        if not (now or before):
            return None
        whole = bool(now and before)
        dt = s.t - prev.t
        decode = decode_tps(pm, m) if dt <= MAX_GAP_S else None
        if not whole and decode is None:
            return None
        gen = counter_rate(pm.generation_tokens_total, m.generation_tokens_total, dt)
        if gen is None:
            gen = s.rates.generation_tps
        if gen is None:
            return None
        prompt = counter_rate(pm.prompt_tokens_total, m.prompt_tokens_total, dt)
        if prompt is None:
            prompt = s.rates.prompt_tps
        running = now if whole else max(now, before)
        if whole:
            self._running = running
        # Per request, so that a change of concurrency is never a fall: vLLM's per-token
        # latency when it has it (prefill does not hide it), else the total over the requests.
        measure, rate = (
            (INTER_TOKEN_LATENCY, decode)
            if decode is not None
            else (PER_REQUEST, gen / max(1.0, running))
        )
        ratio = self._normal.ratio(measure, running, rate)
        collapsed = ratio is not None and ratio < COLLAPSE_RATIO
        healthy = ratio is None or ratio >= RECOVERED_RATIO
        return Point(
            s.t,
            gen,
            rate,
            prompt,
            running,
            collapsed,
            healthy,
            measure=measure,
            ratio=ratio,
            whole=whole,
        )

    def _prefilling(self, point: Point) -> bool:
        """A per-request rate that prefill lowers (the latency measure is not lowered)."""
        return (
            point.measure == PER_REQUEST
            and point.prompt_tps is not None
            and point.prompt_tps >= PREFILL_TPS
        )

    def _learn(self, point: Point) -> None:
        if VRAM_CONTENTION in self._open:
            return
        if point.ratio is not None and point.ratio < ADMIT_RATIO:
            return  # suspect: a collapse must not teach the normal
        if point.measure == INTER_TOKEN_LATENCY:
            self._normal.add(INTER_TOKEN_LATENCY, point.running, point.per_request_tps)
        # The fallback measure is learned too (a second whose histogram saw too few tokens is
        # judged by it), but only from seconds without prefill, which lowers it, and with
        # requests running from end to end.
        if not point.whole or (point.prompt_tps is not None and point.prompt_tps >= PREFILL_TPS):
            return
        per_request = point.generation_tps / max(1.0, point.running)
        ratio = self._normal.ratio(PER_REQUEST, point.running, per_request)
        if ratio is None or ratio >= ADMIT_RATIO:
            self._normal.add(PER_REQUEST, point.running, per_request)

    # --- rules ---------------------------------------------------------------------------------
    def _check_contention(self, s: Sample, device: GpuDevice | None, point: Point | None) -> None:
        # A second with no normal to judge it by (its histogram saw too few tokens and the
        # fallback measure has none yet) says nothing either way: it neither opens nor closes.
        if point is not None and point.ratio is not None and not self._prefilling(point):
            if device is not None and set(device.throttle) & SLOWDOWN_REASONS:
                # Slow clocks explain a slow second: it counts neither way.
                point = replace(point, collapsed=False, healthy=False)
            self._points.append(point)
        squeeze = self._squeeze(s, device) if point is not None else None
        self._check_remembered(point, squeeze)
        if self._check_memory_only(s, device, point):
            return
        healthy = sum(p.healthy for p in self._points)
        if VRAM_CONTENTION in self._open and healthy >= CLOSE_COUNT:
            self._close(VRAM_CONTENTION, s.t)
            return
        # Only a sample with requests running can open or refresh it: old slow seconds must
        # not become a finding while idle, and an open one keeps its last numbers.
        if device is None or point is None or squeeze is None:
            return
        points = self._collapsed_points(s)
        if not points:
            return
        collapse = Collapse(
            points=points,
            baseline_tps=self._normal.reference(points[-1].measure, points[-1].running) or 0.0,
            kv=squeeze.kv,
            fill=squeeze.fill,
            growth=squeeze.growth,
            normal=self.normal_rate(),
        )
        report = contention_report(s, device, collapse, self._desktop_share(), self._any_spill())
        self._set(VRAM_CONTENTION, s.t, **report)

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
            if not needs_memory or squeeze_in_memory(s, self._any_spill(), self._outside_budget):
                return points
        return []

    def _any_spill(self) -> SpillEvidence | None:
        """The server's memory seen spilled: the WSL VM's shared memory, or AMD's GTT."""
        return self._spill.spill_evidence() or self._gtt.spill_evidence(source="gtt")

    def _desktop_share(self) -> DesktopShare:
        return DesktopShare(
            self._desktop_at_start,
            self._desktop_peak,
            self._outside_budget,
            growth_rate(self._desktop_history),
        )

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
            desktop - self._desktop_at_start
            if desktop is not None and self._desktop_at_start is not None
            else None
        )
        if fill < CARD_FULL and (growth is None or growth < DESKTOP_GROWTH_BYTES):
            return None
        return Squeeze(kv=kv, fill=fill, growth=growth)

    def _check_remembered(self, point: Point | None, squeeze: Squeeze | None) -> None:
        """A remembered normal that running seconds contradict for long while nothing
        squeezes the server was wrong for this run (a new driver, longer contexts): forget it
        and learn the normal again."""
        if point is None or point.ratio is None or self._normal.remembered is None:
            return
        if point.healthy or squeeze is not None or VRAM_CONTENTION in self._open:
            self._contradicted = 0 if point.healthy else self._contradicted
            return
        self._contradicted += 1
        if self._contradicted >= RELEARN_SAMPLES:
            self._normal.forget_remembered()
            self._contradicted = 0

    def _check_memory_only(self, s: Sample, device: GpuDevice | None, point: Point | None) -> bool:
        """With no normal rate at all, the Windows side alone can show the squeeze: the
        desktop's programs hold more than the budget leaves them and part of the WSL VM's
        memory is in system memory. True while that rule owns the finding."""
        current = self._open.get(VRAM_CONTENTION)
        memory_only = current is not None and current.confidence is not None
        if point is None or device is None:
            return memory_only
        if not memory_only and self.normal_rate() is not None:
            return False  # a normal rate is known: the rate rule decides
        evidence = memory_evidence(s, self._spill.spill_evidence())
        self._memory_window.append(evidence is not None)
        if memory_only and not any(list(self._memory_window)[-OPEN_WINDOW:]):
            self._close(VRAM_CONTENTION, s.t)
            return True
        if evidence is not None and sum(list(self._memory_window)[-OPEN_WINDOW:]) >= OPEN_COUNT:
            report = memory_report(s, device, evidence, self._desktop_share())
            self._set(VRAM_CONTENTION, s.t, **report)
            return True
        return memory_only

    def _check_kv(self, prev: Sample | None, s: Sample) -> None:
        m = read.metrics(s)
        if m is None or read.state(s) not in (ServerState.RUNNING, None):
            return
        pm = read.metrics(prev) if prev is not None else None
        grew = counter_delta(pm.preemptions_total if pm else None, m.preemptions_total)
        if grew:
            self._last_preemption_t = s.t
        preempting = (
            self._last_preemption_t is not None
            and s.t - self._last_preemption_t <= PREEMPTION_RECENT_S
        )
        waiting = bool(m.requests_waiting)
        kv = m.kv_cache_usage
        self._kv_window.append(kv is not None and kv >= KV_HIGH and (preempting or waiting))
        if KV_PRESSURE in self._open and not any(self._kv_window) and (kv or 0) < KV_CLEAR:
            self._close(KV_PRESSURE, s.t)
        elif sum(self._kv_window) >= THROTTLE_OPEN and kv is not None:
            report = kv_report(s, m, kv, preempting, self._desktop_peak, self._outside_budget)
            self._set(KV_PRESSURE, s.t, **report)

    def _check_throttle(self, s: Sample, device: GpuDevice | None, point: Point | None) -> None:
        if device is None:
            return
        reasons = sorted(set(device.throttle) & SLOWDOWN_REASONS)
        ratio = point.ratio if point is not None else None
        slow = ratio is not None and ratio < HOT_SLOW_RATIO  # 0.0 (stalled) is slow too
        hot = device.temperature_c is not None and device.temperature_c >= HOT_C
        self._throttle_window.append(bool(reasons) or (hot and slow))
        if GPU_THROTTLING in self._open and not any(self._throttle_window):
            self._close(GPU_THROTTLING, s.t)
        elif sum(self._throttle_window) >= THROTTLE_OPEN and self._throttle_window[-1]:
            tps = point.generation_tps if point else None
            self._set(GPU_THROTTLING, s.t, **throttle_report(device, reasons, tps))

    def _check_health(self, s: Sample, state: ServerState | None) -> None:
        if state is ServerState.CRASHED:
            # An exit event already said why (a crash, a startup failure, a planned stop).
            if not self._planned_exit and not self._exit_seen:
                self._crash(s.t, "the server's state is crashed", {"state": "crashed"})
            return
        server = s.server
        if server is None or not server.reachable or state not in (ServerState.RUNNING, None):
            return
        if server.healthy:
            self._was_healthy = True
            self._unhealthy_run = 0
            self._close(SERVER_CRASHED, s.t)
        elif server.healthy is False and self._was_healthy:
            self._unhealthy_run += 1
            if self._unhealthy_run >= UNHEALTHY_SAMPLES:
                self._crash(
                    s.t, "/health fails after being healthy: the engine died", {"healthy": False}
                )

    def _check_answering(self, s: Sample, state: ServerState | None) -> None:
        """Open while the server's process holds its port but answers nothing (hung or
        stopped); close once it answers again or is down."""
        quiet = s.server.not_answering_s if s.server is not None else None
        down = state in (ServerState.STOPPED, ServerState.STOPPING, ServerState.CRASHED)
        if quiet is not None and quiet >= NOT_ANSWERING_S and not down:
            self._set(SERVER_NOT_ANSWERING, s.t, **not_answering_report(quiet))
        else:
            self._close(SERVER_NOT_ANSWERING, s.t)

    def _on_exit(self, t: float, detail: Mapping[str, Any]) -> None:
        self._exit_seen = True
        lines = detail.get("last_lines") or []
        if isinstance(lines, str):
            lines = [lines]
        elif not isinstance(lines, (list, tuple)):
            lines = []  # a malformed recording: no lines to read
        if any(self._check_oom_text(t, str(line)) for line in lines):
            self._planned_exit = False
            return
        if self._planned_exit:
            self._planned_exit = False
            return
        code = detail.get("returncode")
        self._crash(
            t, f"the server exited with code {code} without being asked to", {"returncode": code}
        )

    def _crash(self, t: float, why: str, evidence: dict[str, Any]) -> None:
        for kind in (VRAM_CONTENTION, KV_PRESSURE):
            self._close(kind, t)
        self._set(SERVER_CRASHED, t, **crash_report(why, evidence))

    def _check_oom_text(self, t: float, text: str) -> bool:
        facts = startup_oom_facts(text)
        if facts is None:
            return False
        self._set(STARTUP_OUT_OF_MEMORY, t, **startup_oom_report(text, facts))
        return True
