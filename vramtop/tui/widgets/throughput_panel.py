"""Throughput: generation and prompt tokens/s against the normal rate.

The normal rate is the one expected at the current concurrency (learned by the diagnosis).
The generation figure shown is smoothed over a few seconds of generating: an agent's
requests come with pauses between them, and a second in which one ended halfway would make
the figure jump (29, 82, 31, …). The normal rate beside it is smoothed over the same
readings: the expected total follows the number of requests running, which an agent changes
every few seconds, and a 5 s figure beside this second's normal would read as a fall (80
beside 148) when nothing is slow. Only the screen is smoothed; the diagnosis keeps its own
unsmoothed inputs.

Under an agent's traffic the total understates decode speed: a running request that is still
reading its prompt generates nothing, so three requests can make 41 tok/s between them while
each decodes at its normal 80. Where vLLM exports its per-token latency histogram, the panel
also shows the speed each request decodes at over the same seconds (the measure the diagnosis
judges a collapse by) and puts the normal per-request speed beside that figure, not beside the
total: like is compared with like. Without the histogram the total is compared with the total
the running requests normally reach.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rich.cells import cell_len
from textual.content import Content

from vramtop.core.adaptive_words import LABEL, AdaptiveState, budget_variants
from vramtop.core.diagnosis.normal_rate import (
    INTER_TOKEN_LATENCY,
    REMEMBERED,
    NormalRate,
    ago,
    decode_tps,
)
from vramtop.core.model import DoorReading, ServerMetrics
from vramtop.machines.interface import Frame
from vramtop.tui.format import count, server_gone, tps
from vramtop.tui.widgets.text_panel import HISTORY, Detail, Row, Spark, TextPanel

# Seconds of the samples' own time that the figure shown averages over (a replay at ×20
# covers 100 s of recording in five ticks: those are not the last few seconds).
SMOOTH_S = 5.0

# A figure under this share of the normal rate is coloured as low, nothing more: naming a
# collapse is the diagnosis's job, and its rule is a fall below 0.35 (COLLAPSE_RATIO).
LOW_SHARE = 0.5


class ThroughputPanel(TextPanel):
    """Rows: generation rate and its history, prompt rate and its history, requests."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        # The readings of the last SMOOTH_S seconds: the figures shown.
        self._recent: deque[_Reading] = deque()
        # The sparklines' histories, one value a new sample (the same frame again, a replay's
        # last, adds none).
        self._generation: deque[float] = deque(maxlen=HISTORY)
        self._prompt: deque[float] = deque(maxlen=HISTORY)
        self._last_t: float | None = None

    @property
    def generation_history(self) -> tuple[float, ...]:
        """The generation rates the sparkline draws, oldest first."""
        return tuple(self._generation)

    def on_mount(self) -> None:
        self.border_title = "Throughput"

    def show(self, frame: Frame, origin: str | None = None) -> None:
        """`frame`: its sample, the normal rates (`normal`) and the normal per-request
        speeds (`normal_rate`, compared with the per-request decode speed); `origin`: where
        the normal rate came from, in a few words."""
        sample, normal_rates, normal_rate = frame.sample, frame.normal, frame.normal_rate
        rates = sample.rates
        if sample.t != self._last_t:
            self._last_t = sample.t
            self._generation.append(rates.generation_tps or 0.0)
            self._prompt.append(rates.prompt_tps or 0.0)
        base_gen = normal_rates.generation_tps if normal_rates else None
        base_prompt = normal_rates.prompt_tps if normal_rates else None
        metrics = sample.server.metrics if sample.server else None
        if metrics is None:
            reason = sample.server.error if sample.server and sample.server.error else "no metrics"
            line = Content.assemble(("requests: ", "$text-muted"), (reason, "$warning"))
        else:
            line = Content(
                f"requests {count(metrics.requests_running)} running · "
                f"{count(metrics.requests_waiting)} waiting"
            )
            gone = server_gone(sample)
            if gone:
                line = Content.assemble(line.stylize("$text-muted"), (" (stale)", "$warning"))
        recent = self._recent
        if not recent or sample.t != recent[-1].t:  # the same frame again adds nothing
            recent.append(_Reading(sample.t, rates.generation_tps or 0.0, base_gen, metrics))
        while recent and recent[0].t <= sample.t - SMOOTH_S:
            recent.popleft()
        shown = shown_rate(rates.generation_tps, [(r.t, r.generation) for r in recent])
        normal = shown_normal(base_gen, [(r.t, r.generation, r.normal) for r in recent])
        decode = window_decode_tps([r.metrics for r in recent])
        each_normal = window_normal_tps(normal_rate, [r.metrics for r in recent])
        rows: list[Row | Detail] = [
            _GenerationRow(shown, normal, origin, decode, each_normal),
            Detail(_plot(tuple(self._generation), normal)),
            # Prompt rates follow the agent's prompt sizes: there is no "normal" prompt rate.
            _rate_line("prompt", rates.prompt_tps, None),
            Detail(_plot(tuple(self._prompt), base_prompt)),
            line,
        ]
        if sample.door is not None:  # only where a front door answers: else no row at all
            rows.append(DoorRow(sample.door))
        if frame.adaptive is not None:  # only while a guard runs adaptively for the profile
            rows.append(AdaptiveRow(frame.adaptive))
        self.set_rows(rows)


def normal_origin(normal: NormalRate | None, now: float) -> str:
    """Where the normal rate came from: 'learned now', 'remembered 2 h ago', or that there is
    none yet to judge the rate by."""
    if normal is None:
        return "can't judge yet"
    age = normal.age_s(now)
    if normal.source == REMEMBERED and age is not None:
        return "remembered " + ago(age)
    return "learned now"


@dataclass(frozen=True)
class _Reading:
    t: float
    generation: float
    normal: float | None  # the total the running requests normally reach
    metrics: ServerMetrics | None


@dataclass(frozen=True)
class _GenerationRow:
    """The generation figure and its normal, in as much detail as the panel's width holds:
    where-the-normal-came-from goes first, then the label's padding."""

    total: float | None
    normal_total: float | None
    origin: str | None
    each: float | None = None  # per request, from vLLM's latency histogram
    normal_each: float | None = None

    def draw(self, width: int) -> Content:
        variants = self._variants()
        for variant in variants:
            if width <= 0 or cell_len(variant.plain) <= width:
                return variant
        return variants[-1]

    def _variants(self) -> list[Content]:
        origin = [(f" · {self.origin}", "$text-muted")] if self.origin else []
        if self.each is None or self.normal_each is None:
            # Learned while requests run, per server start (see core/diagnosis/normal_rate.py).
            total = _figure(f"{tps(self.total):>5} tok/s", self.total, self.normal_total)
            normal = (f"  normal {tps(self.normal_total)}", "$text-muted")  # "—" until learned
            return [
                Content.assemble(f"{'generation':<10} ", total, normal, *origin),
                Content.assemble(f"{'generation':<10} ", total, normal),
                Content.assemble("gen ", total, normal),
            ]
        total = (f"{tps(self.total):>5} tok/s", "bold")
        each = _figure(f"{tps(self.each)}/req", self.each, self.normal_each)
        normal = (f" · normal {tps(self.normal_each)}", "$text-muted")
        return [
            Content.assemble(f"{'generation':<10} ", total, "  ", each, normal, *origin),
            Content.assemble(f"{'generation':<10} ", total, "  ", each, normal),
            Content.assemble("gen ", (f"{tps(self.total)} tok/s", "bold"), " · ", each, normal),
        ]


@dataclass(frozen=True)
class DoorRow:
    """What the front door sees, in as much detail as the panel's width holds: requests in
    flight, time to first token and end-to-end latency (p50/p95 over its latest requests), the
    speed each request decoded at as its client saw it (p50: a second opinion beside vLLM's
    histogram) and those held; while it holds requests, how many and the longest wait.
    Narrower, the p95s go first, then the end-to-end latency and the decode speed."""

    door: DoorReading

    def draw(self, width: int) -> Content:
        variants = self._variants()
        for variant in variants:
            if width <= 0 or cell_len(variant.plain) <= width:
                return variant
        return variants[-1]

    def _variants(self) -> list[Content]:
        door = self.door
        label = ("door: ", "$text-muted")
        if door.held:
            longest = f" (longest {hold_seconds(door.longest_hold_s)} s)"
            return [
                Content.assemble(label, (f"holding {door.held}", "bold $warning"), longest),
                Content.assemble(label, (f"holding {door.held}", "bold $warning")),
            ]
        flight = f"{door.in_flight} in flight"
        if door.holding:  # a restart under way, nothing waiting yet
            held = ("holding new requests", "$warning")
            return [
                Content.assemble(label, flight, " · ", held),
                Content.assemble(label, held),
            ]
        ttft, e2e = seconds(door.ttft_p50_s), seconds(door.e2e_p50_s)
        ttft95, e2e95 = seconds(door.ttft_p95_s), seconds(door.e2e_p95_s)
        decode = tps(door.decode_tps_p50)
        full = (
            f"TTFT p50 {ttft} s p95 {ttft95} s",
            f"e2e p50 {e2e} s p95 {e2e95} s",
            f"{decode} tok/s/req",
        )
        lines = [
            (flight, *full, f"held {door.held}"),
            (flight, *full),
            # p50/p95, as the wider lines name them.
            (flight, f"TTFT {ttft}/{ttft95} s", f"e2e {e2e}/{e2e95} s", f"{decode} tok/s/req"),
            (flight, f"TTFT {ttft} s", f"e2e {e2e} s", f"{decode}/req"),
            (flight, f"TTFT {ttft} s"),
            (flight,),
        ]
        return [Content.assemble(label, " · ".join(parts)) for parts in lines]


def local_hhmm(t: float) -> str:
    """A step's Unix time as the local clock said it: 14:02."""
    return time.strftime("%H:%M", time.localtime(t))


@dataclass(frozen=True)
class AdaptiveRow:
    """The adaptive guard's budgets and last steps, in as much detail as the panel's width
    holds: "budget: 0.93 outside calls, 0.85 during; down 14:02, up 14:41"."""

    state: AdaptiveState
    hhmm: Callable[[float], str] = local_hhmm

    def draw(self, width: int) -> Content:
        variants = budget_variants(self.state, self.hhmm)
        chosen = variants[-1]
        for variant in variants:
            if width <= 0 or cell_len(variant) <= width:
                chosen = variant
                break
        return Content.assemble((LABEL, "$text-muted"), chosen.removeprefix(LABEL))


def seconds(value: float | None) -> str:
    """A latency as the door row shows it: 0.21, 3.1, 42 ("—": not measured yet)."""
    if value is None:
        return "—"
    if value < 1:
        return f"{value:.2f}"
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def hold_seconds(value: float) -> str:
    """How long a request waited at the door: whole seconds, tenths under one."""
    return f"{value:.1f}" if value < 1 else f"{value:.0f}"


def _figure(text: str, now: float | None, normal: float | None) -> tuple[str, str]:
    """A figure, in the error colour when it fell below LOW_SHARE of its normal."""
    low = now is not None and normal is not None and normal > 0 and now < LOW_SHARE * normal
    return text, "bold $error" if low else "bold"


def _rate_line(label: str, now: float | None, normal: float | None) -> Content:
    return Content.assemble(f"{label:<10} ", _figure(f"{tps(now):>5} tok/s", now, normal))


def window_decode_tps(readings: Iterable[ServerMetrics | None]) -> float | None:
    """The speed each running request decoded at over the readings' seconds: vLLM's
    per-token latency histogram from the first reading that has it to the last (None
    without the histogram, across a reset, or with too few tokens decoded)."""
    with_histogram = [m for m in readings if m and m.inter_token_latency_count is not None]
    if len(with_histogram) < 2:
        return None
    return decode_tps(with_histogram[0], with_histogram[-1])


def window_normal_tps(
    normal_rate: NormalRate | None, readings: Iterable[ServerMetrics | None]
) -> float | None:
    """The normal per-request decode speed to compare `window_decode_tps` with: the one of
    the concurrency the window's tokens were decoded at, the mean number of requests running
    in its readings that had any. (The count at one scrape is a moment: three streams whose
    requests end and begin read 1 now and then, and bucket 1's faster normal beside a speed
    decoded by three would read as a fall.)"""
    if normal_rate is None:
        return None
    running = [m.requests_running for m in readings if m and m.requests_running]
    if not running:
        return normal_rate.for_running(1.0, INTER_TOKEN_LATENCY)
    return normal_rate.for_running(sum(running) / len(running), INTER_TOKEN_LATENCY)


def shown_rate(now: float | None, recent: Iterable[tuple[float, float]]) -> float | None:
    """The figure to show: the mean of the `recent` (time, rate) readings that generated
    anything (the caller keeps the last `SMOOTH_S` seconds).

    None (shown "—") when the rate is not known now; 0 once nothing was generated in the
    whole window (idle, not a pause between two requests)."""
    if now is None:
        return None
    generating = [rate for _t, rate in recent if rate > 0]
    return sum(generating) / len(generating) if generating else now


def shown_normal(
    now: float | None, recent: Iterable[tuple[float, float, float | None]]
) -> float | None:
    """The normal rate to show beside `shown_rate`'s figure: the mean of the normal rates of
    the same readings (those that generated anything), else the one of now."""
    normals = [normal for _t, rate, normal in recent if rate > 0 and normal is not None]
    return sum(normals) / len(normals) if normals else now


def _plot(data: tuple[float, ...], normal: float | None) -> Spark:
    # Fixed scale: a bit above the normal rate, so a collapse reads as a fall, not as noise;
    # raised to the largest value on screen when traffic runs above it.
    return Spark(data, ceiling=max((normal or 0.0) * 1.15, 1.0), fit_drawn=True)
