"""Throughput: generation and prompt tokens/s against the normal rate.

The panel only draws: every figure comes from the frame's throughput view
(`core.diagnosis.throughput`), worked out once where the sample was diagnosed, so the panel,
the banner, the door line, `--once --json` and the exporter say the same rate and normal.

The generation figure is the view's mean over a few seconds of generating, beside the normal
of the same seconds. Under an agent's traffic the total understates decode speed (a request
still reading its prompt generates nothing), so where the diagnosis judged a per-request
speed this second, the panel shows it beside the normal it was judged against: like is
compared with like. Without one the total stands beside the total the running requests
normally reach.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.cells import cell_len
from textual.content import Content

from vramtop.core.adaptive_words import LABEL, AdaptiveState, budget_variants
from vramtop.core.model import DoorReading, Sample
from vramtop.machines.interface import Frame
from vramtop.tui.format import count, server_gone, tps
from vramtop.tui.widgets.text_panel import (
    HISTORY,
    Detail,
    Facts,
    Row,
    Spark,
    TextPanel,
    Wrapped,
)

if TYPE_CHECKING:
    # The view comes with the frame: the console's first frame waits for none of the
    # diagnosis' modules.
    from vramtop.core.diagnosis.throughput import ThroughputView

# A figure under this share of the normal rate is coloured as low, nothing more: naming a
# collapse is the diagnosis's job, and its rule is a fall below 0.35 (COLLAPSE_RATIO).
LOW_SHARE = 0.5


class ThroughputPanel(TextPanel):
    """Rows: generation rate and its history, prompt rate and its history, requests."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
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

    def show(self, frame: Frame) -> None:
        """`frame`: its sample and its throughput view (what is drawn; a frame whose sample
        was not diagnosed draws the sample's own rates, judged against nothing)."""
        sample = frame.sample
        rates = sample.rates
        if sample.t != self._last_t:
            self._last_t = sample.t
            self._generation.append(rates.generation_tps or 0.0)
            self._prompt.append(rates.prompt_tps or 0.0)
        view = frame_view(frame)
        base_prompt = frame.normal.prompt_tps if frame.normal else None
        line = _requests_row(sample)
        row = generation_row(view, rates.generation_tps)
        door = door_row(frame)
        rows: list[Row | Detail] = [
            row,
            Detail(_plot(tuple(self._generation), row.normal_total)),
            # Prompt rates follow the agent's prompt sizes: there is no "normal" prompt rate.
            _rate_line("prompt", rates.prompt_tps, None),
            Detail(_plot(tuple(self._prompt), base_prompt)),
            line,
        ]
        if door is not None:  # only where a front door answers: else no row at all
            rows.append(door)
        if frame.adaptive is not None:  # only while a guard runs adaptively for the profile
            rows.append(AdaptiveRow(frame.adaptive))
        self.set_rows(rows)


def _requests_row(sample: Sample) -> Row:
    """The requests running and waiting (marked stale once the server is gone), or why
    there are none: on as many lines as the panel needs, never cut."""
    metrics = sample.server.metrics if sample.server else None
    if metrics is None:
        reason = sample.server.error if sample.server and sample.server.error else "no metrics"
        return Wrapped(Content.assemble(("requests: ", "$text-muted"), (reason, "$warning")))
    facts: tuple[Content, ...] = (
        Content(f"requests {count(metrics.requests_running)} running"),
        Content(f"· {count(metrics.requests_waiting)} waiting"),
    )
    if server_gone(sample):
        stale = Content.styled("(stale)", "$warning")
        facts = (*(fact.stylize("$text-muted") for fact in facts), stale)
    return Facts(facts, separator=" ")


def frame_view(frame: Frame) -> ThroughputView | None:
    """The frame's throughput view, where it is the view of the frame's own sample."""
    view = frame.throughput
    return view if view is not None and view.t == frame.sample.t else None


def door_row(frame: Frame) -> DoorRow | None:
    """The door line of `frame`, with its view's per-request speed (None: no door)."""
    door, view = frame.sample.door, frame_view(frame)
    if door is None:
        return None
    return DoorRow(door, view.per_request_tps if view is not None else None)


def generation_row(view: ThroughputView | None, generation_tps: float | None) -> _GenerationRow:
    """The generation row of `view` (None: the sample's own rate, no normal known)."""
    if view is None:
        return _GenerationRow(generation_tps, None, None)
    return _GenerationRow(
        view.shown_generation_tps,
        view.shown_normal_generation_tps,
        view.origin,
        view.per_request_tps,
        view.normal_per_request_tps,
    )


@dataclass(frozen=True)
class _GenerationRow:
    """The generation figure and its normal, in as much detail as the panel's width holds:
    where-the-normal-came-from goes first, then the label's padding."""

    total: float | None
    normal_total: float | None
    origin: str | None
    each: float | None = None  # per request, from vLLM's latency histogram
    normal_each: float | None = None

    def lay_out(self, width: int) -> list[Content]:
        """One line where it holds where the normal came from; else that goes on a line of
        its own below the figures (never dropped: 'learned now' says whether to trust it)."""
        whole = self._variants(with_origin=True)
        one = next((v for v in whole if width <= 0 or cell_len(v.plain) <= width), None)
        if one is not None:
            return [one]
        variants = self._variants()
        fitting = next((v for v in variants if cell_len(v.plain) <= width), None)
        # Too narrow even for the shortest: its figures on lines of their own, whole.
        lines = [fitting] if fitting else Facts.split(variants[-1]).lay_out(width)
        if self.origin:
            lines.append(Content.styled(f"{'':<11}{self.origin}", "$text-muted"))
        return lines

    def _variants(self, with_origin: bool = False) -> list[Content]:
        origin = [(f" · {self.origin}", "$text-muted")] if self.origin and with_origin else []
        if self.each is None or self.normal_each is None:
            # Learned while requests run, per server start (see core/diagnosis/normal_rate.py).
            total = _figure(f"{tps(self.total):>5} tok/s", self.total, self.normal_total)
            normal = (f"  normal {tps(self.normal_total)}", "$text-muted")  # "—" until learned
            return [
                Content.assemble(f"{'generation':<10} ", total, normal, *origin),
                Content.assemble("gen ", total, normal, *origin),
            ]
        total = (f"{tps(self.total):>5} tok/s", "bold")
        each = _figure(f"{tps(self.each)}/req", self.each, self.normal_each)
        normal = (f" · normal {tps(self.normal_each)}", "$text-muted")
        return [
            Content.assemble(f"{'generation':<10} ", total, "  ", each, normal, *origin),
            Content.assemble(
                "gen ", (f"{tps(self.total)} tok/s", "bold"), " · ", each, normal, *origin
            ),
        ]


@dataclass(frozen=True)
class DoorRow:
    """What the front door sees, in as much detail as the panel's width holds: requests in
    flight, time to first token and end-to-end latency (p50/p95 over its latest requests), the
    speed each request decodes at (the throughput view's, the figure the panel and the
    banner give) and those held; while it holds requests, how many and the longest wait.
    Narrower, the p95s go first, then the end-to-end latency and the decode speed."""

    door: DoorReading
    # The per-request decode speed of the frame's throughput view (the panel's figure; the
    # door's own client-seen p50 lags a collapse by its latest answered requests).
    each_tps: float | None = None

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
        decode = tps(self.each_tps)
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


def _plot(data: tuple[float, ...], normal: float | None) -> Spark:
    # Fixed scale: a bit above the normal rate, so a collapse reads as a fall, not as noise;
    # raised to the largest value on screen when traffic runs above it.
    return Spark(data, ceiling=max((normal or 0.0) * 1.15, 1.0), fit_drawn=True)
