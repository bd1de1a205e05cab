"""The automatic remedy's hourly limit: at most so many relaunches in any hour, counted from
the relaunches the guard started (one vLLM refused before the old server stopped is not
one). Pure: times are passed in."""

from __future__ import annotations

from collections import deque

HOUR_S = 3600.0


class HourlyLimit:
    """At most `per_hour` relaunches in the hour before any moment."""

    def __init__(self, per_hour: int) -> None:
        self.per_hour = per_hour
        self._started: deque[float] = deque()  # when each relaunch of the last hour started

    def refusal(self, t: float, flags: str) -> str | None:
        """Why a relaunch at `t` to `flags` (their words) is refused (the limit is reached),
        with when the next may come; None when it may go ahead."""
        recent = [at for at in self._started if t - at < HOUR_S]
        if len(recent) < self.per_hour:
            return None
        next_at = recent[0] + HOUR_S - t
        return (
            f"{len(recent)} automatic relaunches in the last hour already (at most "
            f"{self.per_hour}): not relaunching at {flags}; the next may come in "
            f"{next_at / 60:.0f} min"
        )

    def started(self, t: float) -> None:
        """A relaunch started at `t`."""
        self._started.append(t)
        while self._started and t - self._started[0] >= HOUR_S:
            self._started.popleft()

    def refused(self) -> None:
        """The latest relaunch did not happen (vLLM refused it before the old server
        stopped)."""
        if self._started:
            self._started.pop()
