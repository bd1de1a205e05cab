"""Throughput: generation and prompt tokens/s against the normal rate.

The normal rate is the one expected at the current concurrency (learned by the diagnosis).
The generation figure shown is smoothed over a few seconds of generating: an agent's
requests come with pauses between them, and a second in which one ended halfway would make
the figure jump (29, 82, 31, …). The normal rate beside it is smoothed over the same
readings: the expected total follows the number of requests running, which an agent changes
every few seconds, and a 5 s figure beside this second's normal would read as a fall (80
beside 148) when nothing is slow. Only the screen is smoothed; the diagnosis keeps its own
unsmoothed inputs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from textual.content import Content

from vramtop.core.diagnosis.normal_rate import REMEMBERED, NormalRate, ago
from vramtop.core.model import Rates, Sample
from vramtop.tui.format import count, server_gone, tps
from vramtop.tui.widgets.text_panel import Detail, Spark, TextPanel

# Seconds of the samples' own time that the figure shown averages over (a replay at ×20
# covers 100 s of recording in five ticks: those are not the last few seconds).
SMOOTH_S = 5.0

# A collapse is a fall below this share of the normal rate: colour the figure, nothing more
# (naming a collapse is the diagnosis engine's job).
LOW_SHARE = 0.5


class ThroughputPanel(TextPanel):
    """Rows: generation rate and its history, prompt rate and its history, requests."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        # (sample time, generation rate, normal rate then) of the last SMOOTH_S seconds: the
        # figures shown.
        self._recent: deque[tuple[float, float, float | None]] = deque()

    def on_mount(self) -> None:
        self.border_title = "Throughput"

    def show(
        self,
        sample: Sample,
        baseline: Rates | None,
        generation: tuple[float, ...],
        prompt: tuple[float, ...],
        origin: str | None = None,
    ) -> None:
        """`origin`: where the normal rate came from, in a few words."""
        rates = sample.rates
        base_gen = baseline.generation_tps if baseline else None
        base_prompt = baseline.prompt_tps if baseline else None
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
        if not recent or sample.t != recent[-1][0]:  # the same frame again adds nothing
            recent.append((sample.t, rates.generation_tps or 0.0, base_gen))
        while recent and recent[0][0] <= sample.t - SMOOTH_S:
            recent.popleft()
        shown = shown_rate(rates.generation_tps, [(t, rate) for t, rate, _ in recent])
        normal = shown_normal(base_gen, recent)
        self.set_rows(
            [
                _rate_line("generation", shown, normal, origin),
                Detail(_plot(generation, normal)),
                # Prompt rates follow the agent's prompt sizes: there is no "normal" prompt rate.
                _rate_line("prompt", rates.prompt_tps, None),
                Detail(_plot(prompt, base_prompt)),
                line,
            ]
        )


def normal_origin(normal: NormalRate | None, now: float) -> str:
    """Where the normal rate came from: 'learned now', 'remembered 2 h ago', or that there is
    none yet to judge the rate by."""
    if normal is None:
        return "can't judge yet"
    age = normal.age_s(now)
    if normal.source == REMEMBERED and age is not None:
        return "remembered " + ago(age)
    return "learned now"


def _rate_line(
    label: str, now: float | None, baseline: float | None, origin: str | None = None
) -> Content:
    low = now is not None and baseline is not None and baseline > 0 and now < LOW_SHARE * baseline
    parts: list[str | tuple[str, str]] = [
        f"{label:<10} ",
        (f"{tps(now):>5} tok/s", "bold $error" if low else "bold"),
    ]
    if label == "generation":
        # Learned while requests run, per server start (see core/baseline.py).
        normal = f"normal {tps(baseline)}"  # "—" until learned
        parts.append((f"  {normal}", "$text-muted"))
        if origin:
            parts.append((f" · {origin}", "$text-muted"))
    return Content.assemble(*parts)


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


def _plot(data: tuple[float, ...], baseline: float | None) -> Spark:
    # Fixed scale: a bit above the normal rate, so a collapse reads as a fall, not as noise;
    # raised to the largest value on screen when traffic runs above it.
    return Spark(data, ceiling=max((baseline or 0.0) * 1.15, 1.0), fit_drawn=True)
