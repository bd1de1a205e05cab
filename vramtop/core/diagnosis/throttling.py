"""gpu_throttling: the card slows its clocks (heat, power brake), so the slowdown is not memory.

`ThrottleWatch` holds when it opens and closes; `throttle_report` what it says.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from vramtop.core.diagnosis.book import FindingBook
from vramtop.core.diagnosis.thresholds import (
    HOT_C,
    HOT_SLOW_RATIO,
    SLOWDOWN_REASONS,
    THROTTLE_OPEN,
    THROTTLE_WINDOW,
)
from vramtop.core.findings import (
    Evidence,
    Facts,
    Kind,
    Ladder,
    Remedy,
    RemedyAction,
    Report,
    Severity,
)
from vramtop.core.model import GpuDevice


@dataclass(frozen=True)
class ThrottleFacts(Facts):
    """Throttling's evidence (the session format's keys, in order)."""

    throttle: list[str]
    temperature_c: int | None
    sm_clock_mhz: int | None
    generation_tps: float | None


def throttle_report(device: GpuDevice, reasons: list[str], generation_tps: float | None) -> Report:
    """What the finding says; `reasons` are the slowdown reasons the card reports (may be none
    when it is only hot and slow)."""
    what = ", ".join(reasons) if reasons else f"{device.temperature_c} °C"
    facts = ThrottleFacts(reasons, device.temperature_c, device.sm_clock_mhz, generation_tps)
    return Report(
        severity=Severity.WARNING,
        summary=f"The GPU is throttling its clocks ({what}): the slowdown is not memory.",
        evidence=Evidence.of(facts),
        ladder=Ladder(
            observed=(f"clock throttle reasons: {what}",),
            inferred=("the GPU runs slower than it can",),
        ),
        remedy=Remedy(
            action=RemedyAction.COOL_DOWN,
            why="improve cooling or airflow, or lower the power limit; "
            "memory settings will not help",
        ),
    )


class ThrottleWatch:
    """Open while the card reports slowdown reasons (or is hot while decoding slowly) on
    enough of the last samples; close once none of them does."""

    def __init__(self, book: FindingBook) -> None:
        self._book = book
        self._window: deque[bool] = deque(maxlen=THROTTLE_WINDOW)

    def new_epoch(self) -> None:
        self._window.clear()

    def check(
        self, t: float, device: GpuDevice | None, ratio: float | None, generation_tps: float | None
    ) -> None:
        """`ratio`: the decode speed against the normal one (None: not measured)."""
        if device is None:
            return
        reasons = sorted(set(device.throttle) & SLOWDOWN_REASONS)
        slow = ratio is not None and ratio < HOT_SLOW_RATIO  # 0.0 (stalled) is slow too
        hot = device.temperature_c is not None and device.temperature_c >= HOT_C
        self._window.append(bool(reasons) or (hot and slow))
        if self._book.is_open(Kind.GPU_THROTTLING) and not any(self._window):
            self._book.close(Kind.GPU_THROTTLING, t)
        elif sum(self._window) >= THROTTLE_OPEN and self._window[-1]:
            self._book.set(Kind.GPU_THROTTLING, t, throttle_report(device, reasons, generation_tps))
