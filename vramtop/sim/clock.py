"""The simulator's clock: simulated seconds, and waits counted in them.

The processes of the simulated machine run on `ScaledClock` (real time × the speed factor).
Tests pass a clock of their own that moves only when they say, so minutes of simulated
behaviour run in as long as the arithmetic takes and a busy machine cannot change a rate.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class SimClock(Protocol):
    """What the simulator reads time from."""

    @property
    def speed(self) -> float:
        """Simulated seconds per real second (paces the real work between waits)."""
        ...

    def now(self) -> float:
        """Simulated seconds since the clock began."""
        ...

    def wait(self, seconds: float) -> bool:
        """Let `seconds` of simulated time pass; True when asked to stop instead."""
        ...


class ScaledClock:
    """Real time × `speed`; a wait ends early when `stop` is set."""

    def __init__(self, speed: float = 1.0, stop: threading.Event | None = None) -> None:
        self.speed = speed
        self.stop = stop or threading.Event()
        self._t0 = time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self._t0) * self.speed

    def wait(self, seconds: float) -> bool:
        return self.stop.wait(max(0.0, seconds) / self.speed)
