"""Findings: what is wrong, the numbers that show it, what rules out the rest, what to do.

Pure: samples and events go in (time comes with them), `Finding` values come out. The same
`Diagnoser` runs live in the console and over a recorded session (`vramtop diagnose`).

Kinds (fixed vocabulary, see the session format): vram_contention, kv_pressure,
gpu_throttling, startup_out_of_memory, server_crashed. Every rule opens on several samples
and closes on several, so a noisy signal does not make a finding flap.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from vramtop.core import vllm_args
from vramtop.core.baseline import ADMIT_RATIO, RateBaseline, counter_delta, counter_rate
from vramtop.core.headroom import (
    budget_bytes,
    desktop_headroom_bytes,
    largest_util_leaving,
    predict,
    util_for_kv_tokens,
)
from vramtop.core.live_headroom import live_headroom_inputs
from vramtop.core.model import GIB, MIB, GpuDevice, Sample, ServerMetrics, ServerState
from vramtop.core.windows import SpillTracker, cite_spill

VRAM_CONTENTION = "vram_contention"
KV_PRESSURE = "kv_pressure"
GPU_THROTTLING = "gpu_throttling"
STARTUP_OUT_OF_MEMORY = "startup_out_of_memory"
SERVER_CRASHED = "server_crashed"
KINDS = (VRAM_CONTENTION, KV_PRESSURE, GPU_THROTTLING, STARTUP_OUT_OF_MEMORY, SERVER_CRASHED)

# --- thresholds (why each value: see the comment beside it) ------------------------------
COLLAPSE_RATIO = 0.35  # below a third of healthy: the field report fell to ~10 %
RECOVERED_RATIO = 0.6  # a mild dip (83 → 52 at 0.85) is not a collapse and counts as healthy
# Running samples (1 Hz): the collapse opens when it holds on 5 of the last 6, and closes only
# when 10 of the last 12 are healthy again, so a noisy collapse does not flap.
WINDOW = 12
OPEN_WINDOW = 6
OPEN_COUNT = 5
CLOSE_COUNT = 10
PREFILL_TPS = 100.0  # prompt tokens/s above this: a prefill is making progress, not stuck
KV_LOW = 0.5  # KV usage at or below this cannot explain a slowdown
CARD_FULL = 0.97  # used/total at or above this: the card is nearly full
DESKTOP_GROWTH_BYTES = 512 * MIB  # the non-server share grew by at least this since start
DESKTOP_MARGIN_BYTES = GIB // 2  # what the remedy leaves above the desktop's peak
# When the desktop never got past what the server left it, its visible peak is only what it
# was allowed: its real demand was not seen. Allow for the unseen part, sized like the field
# report's successful change (0.93 → 0.85 gave the desktop ~2.5 GiB back).
UNSEEN_DESKTOP_DEMAND_BYTES = 2 * GIB
KV_HIGH = 0.9
KV_CLEAR = 0.85
PREEMPTION_RECENT_S = 10.0
THROTTLE_WINDOW = 5
THROTTLE_OPEN = 3
# Clock reasons that slow the card. sw_power_cap alone is left out: at full load a card sits
# at its power limit by design, and that is its normal speed, not a slowdown.
SLOWDOWN_REASONS = frozenset({"hw_thermal", "sw_thermal", "hw_slowdown", "hw_power_brake"})
HOT_C = 90  # this hot *and* slower than healthy counts as throttling even without a reason
HOT_SLOW_RATIO = 0.7
UNHEALTHY_SAMPLES = 2  # /health failing this many samples in a row after being healthy

_OOM_LINE = re.compile(
    r"Free memory on device(?:\s+\S+)?\s*\(\s*([\d.]+)\s*/\s*([\d.]+)\s*GiB\)\s*on startup is "
    r"less than desired GPU memory utilization\s*\(\s*([\d.]+)\s*,\s*([\d.]+)\s*GiB\)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Finding:
    """One diagnosis, open (closed_t None) or closed. Numbers in `evidence` are raw units."""

    kind: str
    severity: str  # "critical" or "warning"
    first_seen_t: float
    last_seen_t: float
    closed_t: float | None
    summary: str  # one sentence
    evidence: Mapping[str, Any] = field(default_factory=dict)
    ruled_out: Mapping[str, Any] = field(default_factory=dict)
    # observed / inferred / hypothesis: lists of sentences, as the field report's ladder.
    ladder: Mapping[str, Sequence[str]] = field(default_factory=dict)
    remedy: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_open(self) -> bool:
        return self.closed_t is None

    @property
    def duration_s(self) -> float | None:
        """How long it held: None while still open."""
        return None if self.closed_t is None else self.closed_t - self.first_seen_t

    def to_json(self) -> dict[str, Any]:
        """The `findings[]` entry of `vramtop diagnose --json` (extra keys are additive)."""
        return {
            "kind": self.kind,
            "severity": self.severity,
            "first_seen_t": self.first_seen_t,
            "last_seen_t": self.last_seen_t,
            "closed_t": self.closed_t,
            "duration_s": self.duration_s,
            "summary": self.summary,
            "evidence": dict(self.evidence),
            "ruled_out": dict(self.ruled_out),
            "ladder": {k: list(v) for k, v in self.ladder.items()},
            "remedy": dict(self.remedy),
        }


@dataclass(frozen=True)
class FindingChange:
    """A finding opened or closed since the last `take_changes()`."""

    change: str  # "opened" or "closed"
    finding: Finding


def startup_oom_facts(line: str) -> dict[str, float] | None:
    """The numbers of vLLM's 'Free memory on device … is less than desired …' line."""
    match = _OOM_LINE.search(line)
    if match is None:
        return None
    try:
        free, total, util, wanted = (float(g) for g in match.groups())
    except ValueError:  # "1.2.3": a mangled line, not numbers to act on
        return None
    return {"free_gib": free, "total_gib": total, "requested_util": util, "requested_gib": wanted}


def largest_util_that_fits(free_gib: float, total_gib: float) -> float:
    """The largest 2-decimal utilization whose budget fits in `free_gib`."""
    if total_gib <= 0:
        return 0.0
    util = math.floor(free_gib / total_gib * 100) / 100
    while util > 0 and util * total_gib > free_gib:
        util = round(util - 0.01, 2)
    return max(0.0, util)


def _headroom(total: int, util: float, outside: int) -> int:
    """What the desktop may use beside a server at `util`: total − budget − outside."""
    return int(desktop_headroom_bytes(total, util, outside_budget_bytes=outside))


def largest_util_for_desktop(total: int, desktop_need: int, outside: int) -> float:
    """The largest 2-decimal utilization below 1 that leaves `desktop_need` bytes to the
    desktop; 0.0 when none does."""
    return min(0.99, largest_util_leaving(total, desktop_need, outside))


def kv_cost(
    total: int, util_now: float | None, util_new: float, kv_pool: int | None, kv_tokens: int | None
) -> dict[str, Any]:
    """What a smaller budget costs the KV pool: it shrinks by the budget difference."""
    if util_now is None:
        return {}
    shrink = budget_bytes(total, util_now) - budget_bytes(total, util_new)
    cost: dict[str, Any] = {"budget_change_bytes": -shrink}
    if kv_pool:
        after = max(0, kv_pool - shrink)
        cost.update(kv_pool_bytes=kv_pool, kv_pool_bytes_after=after)
        cost["kv_pool_loss_fraction"] = round(shrink / kv_pool, 3)
        if kv_tokens:
            cost.update(
                kv_cache_tokens=kv_tokens, kv_cache_tokens_after=kv_tokens * after // kv_pool
            )
    return cost


@dataclass
class _Point:
    """One running sample's rates, judged against the baseline."""

    t: float
    generation_tps: float
    per_request_tps: float
    prompt_tps: float | None
    running: float
    collapsed: bool
    healthy: bool


class Diagnoser:
    """Feeds on samples and events in time order; keeps open and closed findings."""

    def __init__(self) -> None:
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
        self._aggregate = RateBaseline()
        self._per_request = RateBaseline()
        self._points: deque[_Point] = deque(maxlen=WINDOW)
        self._desktop_at_start: int | None = None
        self._was_healthy = False
        self._exit_seen = False
        self._unhealthy_run = 0
        self._kv_window: deque[bool] = deque(maxlen=THROTTLE_WINDOW)
        self._last_preemption_t: float | None = None
        self._throttle_window: deque[bool] = deque(maxlen=THROTTLE_WINDOW)
        # WSL2: the Windows side's record of the VM's shared (system-memory) GPU usage. A
        # restart frees any spill, so its baseline starts again with each server.
        self._spill = SpillTracker()

    # --- public API ------------------------------------------------------------------------
    def open_findings(self) -> list[Finding]:
        return sorted(self._open.values(), key=lambda f: f.first_seen_t)

    def all_findings(self) -> list[Finding]:
        """Closed and open findings, in the order they were first seen."""
        return sorted([*self._closed, *self._open.values()], key=lambda f: f.first_seen_t)

    def healthy_generation_tps(self) -> float | None:
        """The healthy generation rate learned since the server's last start (None: not yet)."""
        return self._aggregate.value

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
        if s.windows is not None:
            self._spill.add(s.windows, s.t)
        device = _primary(s)
        state = _state(s)
        self._track_desktop(s, state)
        self._check_health(s, state)
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
    def _track_desktop(self, s: Sample, state: ServerState | None) -> None:
        desktop = _desktop_bytes(s)
        if desktop is None or state not in (ServerState.RUNNING, None):
            return
        if self._desktop_at_start is None:
            self._desktop_at_start = desktop
        self._desktop_peak = max(self._desktop_peak or 0, desktop)
        split = s.split
        if (
            split
            and split.server_bytes
            and split.budget_bytes
            and VRAM_CONTENTION not in self._open
        ):
            self._outside_budget = max(0, split.server_bytes - split.budget_bytes)

    def _measure(self, prev: Sample | None, s: Sample, state: ServerState | None) -> _Point | None:
        """The rates of a sample taken while requests ran at both ends (else None)."""
        if state not in (ServerState.RUNNING, None) or prev is None:
            return None
        m, pm = _metrics(s), _metrics(prev)
        if m is None or pm is None or not m.requests_running or not pm.requests_running:
            return None
        dt = s.t - prev.t
        gen = counter_rate(pm.generation_tokens_total, m.generation_tokens_total, dt)
        if gen is None:
            gen = s.rates.generation_tps
        if gen is None:
            return None
        prompt = counter_rate(pm.prompt_tokens_total, m.prompt_tokens_total, dt)
        if prompt is None:
            prompt = s.rates.prompt_tps
        per_request = gen / max(1.0, m.requests_running)
        agg_ratio = self._aggregate.ratio(gen)
        seq_ratio = self._per_request.ratio(per_request)
        known = agg_ratio is not None and seq_ratio is not None
        # Both the total and the per-request rate must fall: fewer running requests lower the
        # total, more lower each one's share; a real collapse lowers both.
        collapsed = known and agg_ratio < COLLAPSE_RATIO and seq_ratio < COLLAPSE_RATIO  # type: ignore[operator]
        healthy = not known or agg_ratio >= RECOVERED_RATIO or seq_ratio >= RECOVERED_RATIO  # type: ignore[operator]
        return _Point(s.t, gen, per_request, prompt, m.requests_running, collapsed, healthy)

    def _prefilling(self, point: _Point) -> bool:
        return point.prompt_tps is not None and point.prompt_tps >= PREFILL_TPS

    def _learn(self, point: _Point) -> None:
        if self._prefilling(point) or VRAM_CONTENTION in self._open:
            return
        agg, seq = (
            self._aggregate.ratio(point.generation_tps),
            self._per_request.ratio(point.per_request_tps),
        )
        if agg is not None and seq is not None and agg < ADMIT_RATIO and seq < ADMIT_RATIO:
            return  # suspect: a collapse must not teach the baseline
        self._aggregate.add(point.generation_tps)
        self._per_request.add(point.per_request_tps)

    # --- rules ---------------------------------------------------------------------------------
    def _check_contention(self, s: Sample, device: GpuDevice | None, point: _Point | None) -> None:
        if point is not None and not self._prefilling(point):
            if device is not None and set(device.throttle) & SLOWDOWN_REASONS:
                # Slow clocks explain a slow second: it counts neither way.
                point = replace(point, collapsed=False, healthy=False)
            self._points.append(point)
        collapsed = sum(p.collapsed for p in list(self._points)[-OPEN_WINDOW:])
        healthy = sum(p.healthy for p in self._points)
        if VRAM_CONTENTION in self._open and healthy >= CLOSE_COUNT:
            self._close(VRAM_CONTENTION, s.t)
            return
        # Only a sample with requests running can open or refresh it: old slow seconds must
        # not become a finding while idle, and an open one keeps its last numbers.
        if collapsed < OPEN_COUNT or device is None or point is None:
            return
        m = _metrics(s)
        kv = m.kv_cache_usage if m else None
        if kv is not None and kv > KV_LOW:
            return
        if set(device.throttle) & SLOWDOWN_REASONS:
            return  # clocks explain it: gpu_throttling speaks instead
        fill = device.used_bytes / device.total_bytes if device.total_bytes else 0.0
        desktop = _desktop_bytes(s)
        growth = (
            desktop - self._desktop_at_start
            if desktop is not None and self._desktop_at_start is not None
            else None
        )
        if fill < CARD_FULL and (growth is None or growth < DESKTOP_GROWTH_BYTES):
            return
        self._set(VRAM_CONTENTION, s.t, **self._contention_report(s, device, kv, fill, growth))

    def _contention_report(
        self, s: Sample, device: GpuDevice, kv: float | None, fill: float, growth: int | None
    ) -> dict[str, Any]:
        collapsed = [p for p in list(self._points)[-OPEN_WINDOW:] if p.collapsed]
        rate = sum(p.generation_tps for p in collapsed) / len(collapsed)
        prompt = [p.prompt_tps for p in collapsed if p.prompt_tps is not None]
        base = self._aggregate.value or 0.0
        running = collapsed[-1].running
        desktop = _desktop_bytes(s)
        evidence: dict[str, Any] = {
            "generation_tps": round(rate, 2),
            "baseline_generation_tps": round(base, 2),
            "ratio": round(rate / base, 3) if base else None,
            "requests_running": running,
            "kv_cache_usage": kv,
            "used_bytes": device.used_bytes,
            "total_bytes": device.total_bytes,
            "used_fraction": round(fill, 4),
            "desktop_bytes": desktop,
            "desktop_bytes_at_start": self._desktop_at_start,
            "desktop_growth_bytes": growth,
            "desktop_peak_bytes": self._desktop_peak,
            "server_bytes": s.split.server_bytes if s.split else None,
        }
        ruled_out: dict[str, Any] = {}
        if kv is not None:
            ruled_out["kv_pressure"] = {
                "kv_cache_usage": kv,
                "why": f"KV cache usage {kv:.1%} is far from full",
            }
        ruled_out["gpu_throttling"] = {
            "temperature_c": device.temperature_c,
            "throttle": list(device.throttle),
            "why": "no thermal or hardware clock slowdown reported"
            + (f" at {device.temperature_c} °C" if device.temperature_c is not None else ""),
        }
        if prompt:
            mean_prompt = sum(prompt) / len(prompt)
            ruled_out["long_prefill"] = {
                "prompt_tps": round(mean_prompt, 2),
                "why": f"prompt tokens arrive at {mean_prompt:.0f}/s: no long prefill is running",
            }
        used_mib, total_mib = device.used_bytes / MIB, device.total_bytes / MIB
        observed = [
            f"tokens/s fell to {rate:.1f} from a healthy {base:.1f} with "
            f"{running:.0f} request(s) running",
            f"the card is {fill:.0%} full ({used_mib:,.0f} of {total_mib:,.0f} MiB)",
        ]
        if growth is not None and growth >= DESKTOP_GROWTH_BYTES:
            observed.append(f"the desktop's share grew by {growth / GIB:.2f} GiB since the start")
        if kv is not None:
            observed.append(f"KV cache usage is {kv:.1%}, which rules out cache saturation")
        observed.append(ruled_out["gpu_throttling"]["why"])
        ladder = {
            "observed": observed,
            "inferred": ["the desktop and vLLM are competing for physical VRAM"],
            "hypothesis": [
                "some of vLLM's memory lost VRAM residency and is served from system memory, "
                "so PCIe traffic slows every decode step"
            ],
        }
        summary = (
            f"Generation fell to {rate:.1f} tok/s ({rate / base:.0%} of the usual {base:.0f}) "
            f"with KV cache at {kv:.1%} and the card {fill:.0%} full: "
            "the desktop is squeezing vLLM's memory."
            if base and kv is not None
            else f"Generation fell to {rate:.1f} tok/s with the card {fill:.0%} full: "
            "the desktop is squeezing vLLM's memory."
        )
        ladder, evidence = cite_spill(ladder, evidence, self._spill.spill_evidence())
        return {
            "severity": "critical",
            "summary": summary,
            "evidence": evidence,
            "ruled_out": ruled_out,
            "ladder": ladder,
            "remedy": self._contention_remedy(s, device, desktop),
        }

    def _contention_remedy(
        self, s: Sample, device: GpuDevice, desktop: int | None
    ) -> dict[str, Any]:
        total = device.total_bytes
        util_now = _util(s)
        outside = self._outside_budget or 0
        peak = self._desktop_peak or desktop or 0
        need = peak + DESKTOP_MARGIN_BYTES
        headroom_now = _headroom(total, util_now, outside) if util_now is not None else None
        capped = headroom_now is not None and peak <= headroom_now
        if capped:
            need += UNSEEN_DESKTOP_DEMAND_BYTES
        util = largest_util_for_desktop(total, need, outside)
        if util_now is not None:
            util = min(util, round(util_now - 0.01, 2))
        # The desktop's need may not fit beside the model: never propose a budget whose pool
        # cannot hold one max-model-len request (vLLM would refuse to start).
        smallest = _smallest_util_that_serves(s)
        leaves_peak = True
        if smallest is not None and util < smallest:
            util, leaves_peak = smallest, False
        m = _metrics(s)
        cache = m.cache if m else None
        remedy: dict[str, Any] = {
            "action": "relaunch",
            "gpu_memory_utilization": util,
            "desktop_headroom_bytes": _headroom(total, util, outside),
            "desktop_peak_bytes": peak,
            "desktop_margin_bytes": DESKTOP_MARGIN_BYTES,
            "unseen_desktop_demand_bytes": UNSEEN_DESKTOP_DEMAND_BYTES if capped else 0,
            "current_gpu_memory_utilization": util_now,
            "leaves_desktop_peak": leaves_peak,
        }
        remedy.update(
            kv_cost(
                total,
                util_now,
                util,
                cache.kv_cache_memory_bytes if cache else None,
                cache.kv_cache_size_tokens if cache else None,
            )
        )
        # The call is over when the desktop grew and is back near where it started: a restart alone
        # restores the rate (the field report's 82.8 tok/s), at no KV cost.
        if util_now is not None and util >= util_now:
            remedy["action"] = "restart"
            remedy["why"] = (
                "no smaller budget still holds one max-model-len request: restart vLLM once "
                "the desktop's load is gone, or relaunch with a shorter --max-model-len"
            )
        elif (
            desktop is not None
            and self._desktop_at_start is not None
            and peak - self._desktop_at_start >= DESKTOP_GROWTH_BYTES
            and desktop - self._desktop_at_start < DESKTOP_GROWTH_BYTES
        ):
            remedy["action"] = "restart"
            remedy["why"] = (
                "the desktop's share is back down: restart vLLM now; relaunch at "
                f"{util:.2f} to keep the next call from doing it again"
            )
        elif not leaves_peak:
            remedy["why"] = (
                f"relaunch at {util:.2f}, the smallest budget that still holds one "
                f"max-model-len request ({remedy['desktop_headroom_bytes'] / GIB:.2f} GiB for "
                "the desktop, less than its peak): also close desktop programs or shorten "
                "--max-model-len"
            )
        else:
            remedy["why"] = (
                f"relaunch at {util:.2f} to leave the desktop its peak plus a margin "
                f"({remedy['desktop_headroom_bytes'] / GIB:.2f} GiB)"
            )
        return remedy

    def _check_kv(self, prev: Sample | None, s: Sample) -> None:
        m = _metrics(s)
        if m is None or _state(s) not in (ServerState.RUNNING, None):
            return
        pm = _metrics(prev) if prev is not None else None
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
            self._set(KV_PRESSURE, s.t, **self._kv_report(s, m, kv, preempting))

    def _kv_report(
        self, s: Sample, m: ServerMetrics, kv: float, preempting: bool
    ) -> dict[str, Any]:
        info = s.info
        options: list[dict[str, Any]] = []
        device = _primary(s)
        util_now = _util(s)
        if device is not None and util_now is not None:
            outside = self._outside_budget or 0
            need = (self._desktop_peak or 0) + DESKTOP_MARGIN_BYTES
            up = largest_util_for_desktop(device.total_bytes, need, outside)
            if up > util_now + 0.005:
                option: dict[str, Any] = {"flag": "--gpu-memory-utilization", "value": up}
                option.update(
                    kv_cost(
                        device.total_bytes,
                        util_now,
                        up,
                        m.cache.kv_cache_memory_bytes,
                        m.cache.kv_cache_size_tokens,
                    )
                )
                options.append(option)
        seqs = _max_num_seqs(info.argv if info else ())
        options.append(
            {
                "flag": "--max-num-seqs",
                "value": max(1, seqs // 2) if seqs else None,
                "why": "fewer sequences share the pool",
            }
        )
        max_len = info.max_model_len if info else None
        options.append(
            {
                "flag": "--max-model-len",
                "value": max_len // 2 if max_len else None,
                "why": "shorter requests hold fewer blocks",
            }
        )
        evidence = {
            "kv_cache_usage": kv,
            "requests_running": m.requests_running,
            "requests_waiting": m.requests_waiting,
            "preemptions_total": m.preemptions_total,
            "preempting": preempting,
            "kv_cache_tokens": m.cache.kv_cache_size_tokens,
        }
        why = "requests are being preempted" if preempting else "requests are waiting"
        return {
            "severity": "warning",
            "summary": f"The KV cache is {kv:.0%} full and {why}: the pool is too small "
            "for this load.",
            "evidence": evidence,
            "ruled_out": {},
            "ladder": {
                "observed": [f"KV cache usage {kv:.1%}", why],
                "inferred": ["the KV pool is the bottleneck"],
                "hypothesis": [],
            },
            "remedy": {"action": "relaunch", "options": options},
        }

    def _check_throttle(self, s: Sample, device: GpuDevice | None, point: _Point | None) -> None:
        if device is None:
            return
        reasons = sorted(set(device.throttle) & SLOWDOWN_REASONS)
        ratio = self._aggregate.ratio(point.generation_tps) if point is not None else None
        slow = ratio is not None and ratio < HOT_SLOW_RATIO  # 0.0 (stalled) is slow too
        hot = device.temperature_c is not None and device.temperature_c >= HOT_C
        self._throttle_window.append(bool(reasons) or (hot and slow))
        if GPU_THROTTLING in self._open and not any(self._throttle_window):
            self._close(GPU_THROTTLING, s.t)
        elif sum(self._throttle_window) >= THROTTLE_OPEN and self._throttle_window[-1]:
            what = ", ".join(reasons) if reasons else f"{device.temperature_c} °C"
            self._set(
                GPU_THROTTLING,
                s.t,
                severity="warning",
                summary=f"The GPU is throttling its clocks ({what}): the slowdown is not memory.",
                evidence={
                    "throttle": reasons,
                    "temperature_c": device.temperature_c,
                    "sm_clock_mhz": device.sm_clock_mhz,
                    "generation_tps": point.generation_tps if point else None,
                },
                ruled_out={},
                ladder={
                    "observed": [f"clock throttle reasons: {what}"],
                    "inferred": ["the GPU runs slower than it can"],
                    "hypothesis": [],
                },
                remedy={
                    "action": "cool_down",
                    "why": "improve cooling or airflow, or lower the power limit; "
                    "memory settings will not help",
                },
            )

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
        self._set(
            SERVER_CRASHED,
            t,
            severity="critical",
            summary=f"vLLM is down: {why}.",
            evidence=evidence,
            ruled_out={"planned": {"why": "no stop, restart or relaunch was requested"}},
            ladder={"observed": [why], "inferred": [], "hypothesis": []},
            remedy={
                "action": "restart",
                "why": "start the server again and read its last log lines",
            },
        )

    def _check_oom_text(self, t: float, text: str) -> bool:
        facts = startup_oom_facts(text)
        if facts is None:
            return False
        util = largest_util_that_fits(facts["free_gib"], facts["total_gib"])
        self._set(
            STARTUP_OUT_OF_MEMORY,
            t,
            severity="critical",
            summary=(
                f"vLLM could not start: {facts['free_gib']:.2f} GiB were free but its budget "
                f"at {facts['requested_util']:.2f} needs {facts['requested_gib']:.2f} GiB."
            ),
            evidence=facts,
            ruled_out={},
            ladder={
                "observed": [text.strip()],
                "inferred": ["other programs hold more of the card than the budget leaves them"],
                "hypothesis": [],
            },
            remedy={
                "action": "relaunch",
                "gpu_memory_utilization": util,
                "why": f"{util:.2f} is the largest budget that fits the free memory; or close "
                "what holds the card and start again",
            },
        )
        return True


# --- reading a sample ----------------------------------------------------------------------


def _primary(s: Sample) -> GpuDevice | None:
    """The device the server uses (the first one: vramtop watches one card per server)."""
    return s.gpu.devices[0] if s.gpu.devices else None


def _metrics(s: Sample | None) -> ServerMetrics | None:
    if s is None or s.server is None or s.server.stale or not s.server.reachable:
        return None
    return s.server.metrics


def _state(s: Sample) -> ServerState | None:
    if s.info is not None:
        return s.info.state
    return None


def _util(s: Sample) -> float | None:
    m = _metrics(s)
    if m is not None and m.cache.gpu_memory_utilization is not None:
        return m.cache.gpu_memory_utilization
    return s.info.gpu_memory_utilization if s.info else None


def _smallest_util_that_serves(s: Sample) -> float | None:
    """The smallest budget vLLM would start with, by the headroom model calibrated on this
    server; None when its pool is not known."""
    inputs = live_headroom_inputs(s)
    util_now = _util(s)
    if inputs is None or util_now is None:
        return None
    # vLLM refuses a pool that cannot hold one max-model-len request, but some servers (hybrid
    # models, whose per-request need vLLM counts differently) already run below that: for
    # them only a pool with no blocks is known not to start.
    holds_one = predict(inputs, util_now).kv_cache_tokens >= inputs.max_model_len
    return util_for_kv_tokens(inputs, inputs.max_model_len if holds_one else 1)


def _desktop_bytes(s: Sample) -> int | None:
    if s.split is not None and s.split.desktop_bytes is not None:
        return s.split.desktop_bytes
    return None


def _max_num_seqs(argv: Sequence[str]) -> int | None:
    """--max-num-seqs as vLLM reads it (the last occurrence wins); None if absent or unreadable."""
    try:
        return vllm_args.max_num_seqs(argv)
    except ValueError:
        return None
