"""vram_slowdown: the desktop squeezes vLLM's memory and generation slows, short of a collapse.

A collapse (`vram_contention`, under 0.35 of the normal rate) is not the only harm a desktop
does to a server that shares its card. At a budget that leaves the desktop almost exactly
what it takes (the field report after its fix: 0.85, a call's 4.3 GiB of the 4.4 GiB left),
the card is full and the driver's paging slows every decode step, 83 → 52 tok/s per request,
for as long as the call runs. That is a warning, not a collapse: it is told with its
trade-off in numbers, the rate lost against the KV tokens a smaller budget costs.

`SlowdownWatch` holds the rule (the same per-request measure and the same normal as the
collapse, judged on the same seconds); `memory_squeezes` says whether the memory shows the
squeeze; `slowdown_report` what the finding says, with `relaunch.collapse_remedy`'s budget.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from statistics import median

from vramtop.core import sample_facts as read
from vramtop.core.diagnosis.book import FindingBook
from vramtop.core.diagnosis.collapse import (
    THROTTLING_RULED_OUT,
    Point,
    Squeeze,
    ruled_out_by_memory,
)
from vramtop.core.diagnosis.memory_evidence import desktop_over_headroom, squeeze_in_memory
from vramtop.core.diagnosis.normal_rate import INTER_TOKEN_LATENCY, REMEMBERED, NormalRate
from vramtop.core.diagnosis.squeeze_facts import SlowdownFacts
from vramtop.core.diagnosis.suggested_budget import DesktopShare, collapse_remedy
from vramtop.core.diagnosis.thresholds import (
    CARD_FULL,
    COLLAPSE_RATIO,
    DESKTOP_GROWTH_BYTES,
    SLOWDOWN_CLEAR_RATIO,
    SLOWDOWN_CLOSE_COUNT,
    SLOWDOWN_CLOSE_WINDOW,
    SLOWDOWN_NEAR_HEADROOM_BYTES,
    SLOWDOWN_OPEN_COUNT,
    SLOWDOWN_RATIO,
    SLOWDOWN_WINDOW,
)
from vramtop.core.findings import (
    Evidence,
    Kind,
    Ladder,
    Remedy,
    RemedyAction,
    Report,
    RuledOut,
    Severity,
)
from vramtop.core.model import GIB, MIB, GpuDevice, MemoryKind, Sample
from vramtop.core.rate_figures import rate_text
from vramtop.core.windows.prose import cite_spill
from vramtop.core.windows.spill import SpillEvidence


def memory_squeezes(
    s: Sample, squeeze: Squeeze | None, spill: SpillEvidence | None, outside_budget: int | None
) -> bool:
    """The memory shows the desktop squeezing the server this second, enough to explain a
    slowdown: what the collapse's corroborated rule takes (a spill, or the desktop past what
    the budget leaves it; see `squeeze_in_memory`), or a full card whose desktop is within
    `SLOWDOWN_NEAR_HEADROOM_BYTES` of that allowance. Where the split cannot show the
    allowance (derived from the budget), a full card into which the desktop grew.

    `squeeze`: the collapse's own reading of the card (None: KV usage or the clocks explain a
    slow second, or the card has room and the desktop did not grow), required here too."""
    if squeeze is None:
        return False
    if squeeze_in_memory(s, spill, outside_budget):
        return True
    if squeeze.fill < CARD_FULL:
        return False
    over = desktop_over_headroom(s, outside_budget)
    if over is not None:
        return over >= -SLOWDOWN_NEAR_HEADROOM_BYTES
    return squeeze.growth is not None and squeeze.growth >= DESKTOP_GROWTH_BYTES


class SlowdownWatch:
    """Opens while the rate stays under `SLOWDOWN_RATIO` of the normal with the memory showing
    the squeeze on `SLOWDOWN_OPEN_COUNT` of the last `SLOWDOWN_WINDOW` judged seconds; closes
    once the rate is back (`SLOWDOWN_CLEAR_RATIO`) or the squeeze is gone, each on
    `SLOWDOWN_CLOSE_COUNT` of the last `SLOWDOWN_CLOSE_WINDOW`. A collapse supersedes it."""

    def __init__(self, book: FindingBook) -> None:
        self._book = book
        self.new_epoch()

    def new_epoch(self) -> None:
        # Judged seconds and whether the memory showed the squeeze in each.
        self._judged: deque[tuple[Point, bool]] = deque(maxlen=SLOWDOWN_WINDOW)
        # Whether the memory showed the squeeze, for each sample with requests running.
        self._squeezed: deque[bool] = deque(maxlen=SLOWDOWN_CLOSE_WINDOW)

    @property
    def judged_count(self) -> int:
        """The judged seconds in the window now."""
        return len(self._judged)

    def check(
        self, t: float, point: Point | None, judged: bool, squeezed: bool, superseded: bool
    ) -> list[Point]:
        """Close the finding when it is over; the slow seconds that open or refresh it (empty:
        it neither opens nor is refreshed now).

        `point`: this sample's rates (None: no request ran); `judged`: the point counts (it
        has a normal, no prefill hides it, the clocks are not slowed); `squeezed`: see
        `memory_squeezes`; `superseded`: a collapse is open, or the server is not running."""
        if superseded:
            # A collapse is the worse finding: its seconds do not count towards a slowdown.
            self._close(t)
            return []
        if point is not None:
            self._squeezed.append(squeezed)
            if judged:
                self._judged.append((point, squeezed))
        if self._book.is_open(Kind.VRAM_SLOWDOWN) and (self._recovered() or self._squeeze_gone()):
            self._close(t)
            return []
        # Only a judged second under the squeeze opens or refreshes it: an open one keeps its
        # last numbers while nothing can be judged.
        if point is None or not judged or not squeezed:
            return []
        slow = [p for p, sq in self._judged if sq and _ratio(p) < SLOWDOWN_RATIO]
        return slow if len(slow) >= SLOWDOWN_OPEN_COUNT else []

    def _recovered(self) -> bool:
        recent = list(self._judged)[-SLOWDOWN_CLOSE_WINDOW:]
        return sum(_ratio(p) >= SLOWDOWN_CLEAR_RATIO for p, _ in recent) >= SLOWDOWN_CLOSE_COUNT

    def _squeeze_gone(self) -> bool:
        return sum(not sq for sq in self._squeezed) >= SLOWDOWN_CLOSE_COUNT

    def _close(self, t: float) -> None:
        if self._book.is_open(Kind.VRAM_SLOWDOWN):
            self._book.close(Kind.VRAM_SLOWDOWN, t)
        # Closed or superseded, a slowdown is judged again from fresh seconds: the old ones
        # must not reopen it at once.
        self.new_epoch()


def _ratio(point: Point) -> float:
    return point.ratio if point.ratio is not None else 1.0


@dataclass(frozen=True)
class Slowdown:
    """The slow seconds that opened the finding, and what the card looked like then."""

    points: list[Point]
    judged: int  # the judged seconds they were counted among
    normal_tps: float  # the normal per-request rate the points were compared with
    squeeze: Squeeze
    normal: NormalRate | None = None

    @property
    def rate(self) -> float:
        """The per-request decode speed of a typical slow second (their median: the first
        seconds of a collapse, counted slow before it is named, do not drag it down)."""
        return median(p.per_request_tps for p in self.points)

    @property
    def ratio(self) -> float | None:
        return self.rate / self.normal_tps if self.normal_tps else None


def slowdown_report(
    s: Sample,
    device: GpuDevice,
    slowdown: Slowdown,
    desktop: DesktopShare,
    spill: SpillEvidence | None,
) -> Report:
    """What the finding says: the slowdown in numbers, what it rules out, its trade-off."""
    remedy = collapse_remedy(s, device, desktop)
    over = desktop_over_headroom(s, desktop.outside_budget)
    ruled_out = _ruled_out(device, slowdown)
    return Report(
        severity=Severity.WARNING,
        summary=_summary(slowdown, remedy),
        evidence=Evidence.of(_evidence(s, device, slowdown, desktop, over, spill)),
        ruled_out=ruled_out,
        ladder=cite_spill(_ladder(s, device, slowdown, over, ruled_out), spill),
        remedy=remedy,
    )


def _summary(slowdown: Slowdown, remedy: Remedy) -> str:
    return slowdown_words(slowdown.rate, slowdown.normal_tps, remedy)


def slowdown_words(rate: float, normal: float, remedy: Remedy) -> str:
    """The slowdown's summary: its per-request rate against the normal, and the remedy's
    trade-off. The banner says it with the frame's throughput view's figures."""
    said = (
        f"vLLM runs at {rate_text(rate)} of its normal {rate_text(normal)} tok/s per request "
        "while the desktop's memory squeezes it"
    )
    return f"{said}; {trade_off(remedy)}."


def trade_off(remedy: Remedy) -> str:
    """What the remedy's relaunch would do and what it costs the KV pool, in words: "relaunching
    at 0.83 would avoid it and cost 18,000 KV tokens" (or its restart's reason)."""
    util = remedy.budget
    if remedy.action != RemedyAction.RELAUNCH or util is None:
        return remedy.why or "restart vLLM once the desktop's load is gone"
    words = f"relaunching at {util:.2f}"
    if remedy.max_model_len is not None:
        words += f" with --max-model-len {remedy.max_model_len:,}"
    # A budget that cannot leave the desktop its peak eases the squeeze without ending it.
    words += " would avoid it" if remedy.leaves_desktop_peak else " would ease it"
    cost = remedy.cost
    tokens = cost.kv_cache_tokens if cost is not None else None
    after = cost.kv_cache_tokens_after if cost is not None else None
    pool, pool_after = remedy.kv_pool_bytes, remedy.kv_pool_bytes_after
    if tokens is not None and after is not None and tokens > after:
        words += f" and cost {tokens - after:,} KV tokens"
    elif pool is not None and pool_after is not None and pool > pool_after:
        words += f" and cost {(pool - pool_after) / GIB:.2f} GiB of the KV pool"
    return words


def _evidence(
    s: Sample,
    device: GpuDevice,
    slowdown: Slowdown,
    desktop: DesktopShare,
    over: int | None,
    spill: SpillEvidence | None,
) -> SlowdownFacts:
    last = slowdown.points[-1]
    ratio = slowdown.ratio
    total = median(p.generation_tps for p in slowdown.points)
    normal = slowdown.normal
    return SlowdownFacts(
        generation_tps=round(total, 2),
        decode_tps=round(slowdown.rate, 2),
        normal_decode_tps=round(slowdown.normal_tps, 2),
        ratio=round(ratio, 3) if ratio is not None else None,
        decode_measure=last.measure,
        normal_rate_source=normal.source if normal is not None else None,
        normal_rate_saved_at=normal.saved_at if normal is not None else None,
        slow_seconds=len(slowdown.points),
        judged_seconds=slowdown.judged,
        requests_running=last.running,
        kv_cache_usage=slowdown.squeeze.kv,
        used_bytes=device.used_bytes,
        total_bytes=device.total_bytes,
        used_fraction=round(slowdown.squeeze.fill, 4),
        memory_kind=device.memory_kind.value,
        desktop_bytes=read.desktop_bytes(s),
        desktop_bytes_at_start=desktop.at_start,
        desktop_growth_bytes=slowdown.squeeze.growth,
        desktop_peak_bytes=desktop.peak,
        desktop_over_allowance_bytes=over,
        server_bytes=s.split.server_bytes if s.split else None,
        budget_bytes=s.split.budget_bytes if s.split else None,
        spill=spill,
    )


def _ruled_out(device: GpuDevice, slowdown: Slowdown) -> dict[str, RuledOut]:
    ruled_out = ruled_out_by_memory(device, slowdown.squeeze.kv)
    ratio = slowdown.ratio
    if ratio is not None:
        ruled_out[Kind.VRAM_CONTENTION] = RuledOut(
            f"{ratio:.0%} of the normal rate is above the {COLLAPSE_RATIO:.0%} a "
            "collapse is named at",
            {"ratio": round(ratio, 3)},
        )
    return ruled_out


def _ladder(
    s: Sample,
    device: GpuDevice,
    slowdown: Slowdown,
    over: int | None,
    ruled_out: dict[str, RuledOut],
) -> Ladder:
    last, squeeze = slowdown.points[-1], slowdown.squeeze
    origin = (
        " remembered from an earlier run"
        if slowdown.normal is not None and slowdown.normal.source == REMEMBERED
        else ""
    )
    unified = device.memory_kind is MemoryKind.UNIFIED
    observed = [
        f"tokens/s per request at {rate_text(slowdown.rate, 1)} against a normal "
        f"{rate_text(slowdown.normal_tps, 1)}{origin} on {len(slowdown.points)} of the last "
        f"{slowdown.judged} judged seconds, with {last.running:.0f} request(s) running"
        + (" (vLLM's per-token latency)" if last.measure == INTER_TOKEN_LATENCY else ""),
        f"system memory, shared with the GPU, is {squeeze.fill:.0%} in use"
        if unified
        else f"the card is {squeeze.fill:.0%} full ({device.used_bytes / MIB:,.0f} of "
        f"{device.total_bytes / MIB:,.0f} MiB)",
    ]
    desktop = read.desktop_bytes(s)
    if desktop is not None and over is not None:
        allowance = (desktop - over) / GIB
        observed.append(
            f"the desktop holds {desktop / GIB:.2f} GiB, {over / GIB:.2f} GiB more than the "
            f"{allowance:.2f} GiB the budget leaves it"
            if over > 0
            else f"the desktop holds {desktop / GIB:.2f} of the {allowance:.2f} GiB the budget "
            "leaves it"
        )
    elif squeeze.growth is not None and squeeze.growth >= DESKTOP_GROWTH_BYTES:
        observed.append(
            f"the desktop's share grew by {squeeze.growth / GIB:.2f} GiB since the start"
        )
    if squeeze.kv is not None:
        observed.append(f"KV cache usage is {squeeze.kv:.1%}, which rules out cache saturation")
    observed.append(ruled_out[THROTTLING_RULED_OUT].why)
    if Kind.VRAM_CONTENTION in ruled_out:
        observed.append(f"not a collapse: {ruled_out[Kind.VRAM_CONTENTION].why}")
    return Ladder(
        observed=tuple(observed),
        inferred=("the desktop and vLLM are competing for the last of the memory they share",),
        hypothesis=(
            "the kernel reclaims memory vLLM uses, so every decode step waits a little"
            if unified
            else "with no memory to spare, the driver moves vLLM's memory in and out of VRAM, "
            "so every decode step is slower, without collapsing",
        ),
    )
