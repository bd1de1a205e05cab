"""The throughput view: a frame's token rates against the normal, worked out once.

The per-request decode speed the diagnosis judges (`meter.interval_rates`: vLLM's per-token
latency where its histogram moved, else the total over the running requests), the normal it
is judged against (the same measure at the same concurrency) and where that normal came from,
the generation and prompt rates and the requests running: one frozen `ThroughputView` per
sample, made where the sample is diagnosed. The console's throughput panel, its banner and
door line, `--once --json`, the exporter and a replay read it; none works a rate out again,
so the screen cannot disagree with itself or with what is exported.

The generation figure for the screen (`shown_generation_tps`) is the mean over the last
`SMOOTH_S` seconds of samples that generated anything, and the normal beside it
(`shown_normal_generation_tps`) the mean of the same samples' normals: an agent's requests
come with pauses, and a second in which one ended halfway would make the figure jump (29, 82,
31, …). The judged figures are never smoothed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from vramtop.core import sample_facts as read
from vramtop.core.diagnosis.collapse import Point, collapse_words
from vramtop.core.diagnosis.normal_rate import REMEMBERED, NormalRate, ago
from vramtop.core.diagnosis.slowdown import slowdown_words
from vramtop.core.findings import Finding, Kind
from vramtop.core.json_types import JsonObject
from vramtop.core.model import Sample

# Seconds of the samples' own time that the screen's generation figure averages over (a
# replay at x20 covers 100 s of recording in five ticks: those are not the last few seconds).
SMOOTH_S = 5.0
CANNOT_JUDGE = "can't judge yet"


@dataclass(frozen=True)
class ThroughputView:
    """One sample's rates against the normal, as every reader shows them."""

    t: float
    generation_tps: float | None  # this sample's total, all requests together
    prompt_tps: float | None
    # The total the running requests normally reach (the normal per request at this
    # concurrency times the requests running; None: no normal yet).
    normal_generation_tps: float | None
    # The screen's figure and its normal: means over the last SMOOTH_S seconds that generated.
    shown_generation_tps: float | None
    shown_normal_generation_tps: float | None
    # The per-request decode speed the diagnosis judged this second, in `measure`, and the
    # normal it was judged against (None: not judged this second: idle, or too few tokens).
    per_request_tps: float | None
    measure: str | None
    normal_per_request_tps: float | None
    requests_running: float | None
    requests_waiting: float | None
    normal: NormalRate | None  # the normal rate as it stands, and where it came from
    origin: str  # 'learned now', 'remembered 2 h ago', or CANNOT_JUDGE

    @property
    def ratio(self) -> float | None:
        """The per-request speed as a share of its normal (None: either unknown)."""
        rate, normal = self.per_request_tps, self.normal_per_request_tps
        return None if rate is None or not normal else rate / normal

    def to_json(self) -> JsonObject:
        """The view as `--once --json` gives it (an addition to the snapshot's fields)."""
        return {
            "generation_tps": _round(self.generation_tps),
            "normal_generation_tps": _round(self.normal_generation_tps),
            "per_request_tps": _round(self.per_request_tps),
            "per_request_measure": self.measure,
            "normal_per_request_tps": _round(self.normal_per_request_tps),
            "requests_running": None
            if self.requests_running is None
            else int(self.requests_running),
            "normal_origin": self.origin,
        }


def normal_origin(normal: NormalRate | None, now: float) -> str:
    """Where the normal rate came from: 'learned now', 'remembered 2 h ago', or that there is
    none yet to judge the rate by (`now`: the sample's time, wall-clock epoch seconds)."""
    if normal is None:
        return CANNOT_JUDGE
    age = normal.age_s(now)
    if normal.source == REMEMBERED and age is not None:
        return "remembered " + ago(age)
    return "learned now"


class ThroughputWindow:
    """Makes each sample's view: keeps the last `SMOOTH_S` seconds of the screen's figure."""

    def __init__(self) -> None:
        # (t, generation, the normal total then) of the last SMOOTH_S seconds.
        self._recent: deque[tuple[float, float, float | None]] = deque()
        self.view: ThroughputView | None = None  # the latest sample's

    def add(
        self,
        s: Sample,
        judged: Point | None,
        normal: NormalRate | None,
        normal_per_request: float | None,
        normal_generation: float | None,
    ) -> ThroughputView:
        """The view of `s`: `judged` what its interval measured (None: nothing judged),
        `normal_per_request` what that was judged against, `normal_generation` the total the
        running requests normally reach."""
        generation = s.rates.generation_tps
        recent = self._recent
        if not recent or s.t != recent[-1][0]:  # the same sample again adds nothing
            recent.append((s.t, generation or 0.0, normal_generation))
        while recent and recent[0][0] <= s.t - SMOOTH_S:
            recent.popleft()
        m = read.metrics(s)
        self.view = ThroughputView(
            t=s.t,
            generation_tps=generation,
            prompt_tps=s.rates.prompt_tps,
            normal_generation_tps=normal_generation,
            shown_generation_tps=shown_rate(generation, [(t, g) for t, g, _ in recent]),
            shown_normal_generation_tps=shown_normal(normal_generation, recent),
            per_request_tps=judged.per_request_tps if judged is not None else None,
            measure=judged.measure if judged is not None else None,
            normal_per_request_tps=normal_per_request if judged is not None else None,
            requests_running=m.requests_running if m is not None else None,
            requests_waiting=m.requests_waiting if m is not None else None,
            normal=normal,
            origin=normal_origin(normal, s.t),
        )
        return self.view


def shown_rate(now: float | None, recent: Iterable[tuple[float, float]]) -> float | None:
    """The figure to show: the mean of the `recent` (time, rate) readings that generated
    anything. None (shown "—") when the rate is not known now; 0 once nothing was generated
    in the whole window (idle, not a pause between two requests)."""
    if now is None:
        return None
    generating = [rate for _t, rate in recent if rate > 0]
    return sum(generating) / len(generating) if generating else now


def shown_normal(
    now: float | None, recent: Iterable[tuple[float, float, float | None]]
) -> float | None:
    """The normal to show beside `shown_rate`'s figure: the mean of the normals of the same
    readings (those that generated anything), else the one of now."""
    normals = [normal for _t, rate, normal in recent if rate > 0 and normal is not None]
    return sum(normals) / len(normals) if normals else now


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def summary_now(finding: Finding, view: ThroughputView | None) -> str:
    """What the banner says of `finding`: a collapse's or a slowdown's summary with the
    per-request rate and normal of `view` (the figures the throughput panel, the door line,
    `--once --json` and the exporter give for the same frame), else the finding's own."""
    rate = view.per_request_tps if view is not None else None
    normal = view.normal_per_request_tps if view is not None else None
    if view is None or rate is None or not normal:
        return finding.summary
    if finding.kind == Kind.VRAM_SLOWDOWN:
        return slowdown_words(rate, normal, finding.remedy)
    evidence = finding.evidence
    kv, fill = evidence.get("kv_cache_usage"), evidence.get("used_fraction")
    judged = "decode_tps" in evidence  # a rate named it (not the memory alone)
    if finding.kind != Kind.VRAM_CONTENTION or not judged:
        return finding.summary
    if not isinstance(kv, int | float) or not isinstance(fill, int | float):
        return finding.summary
    where = "system memory" if evidence.get("memory_kind") == "unified" else "the card"
    remembered = view.normal is not None and view.normal.source == REMEMBERED
    origin = " remembered from an earlier run" if remembered else ""
    return collapse_words(rate, normal, origin, float(kv), where, float(fill))
