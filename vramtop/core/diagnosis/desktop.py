"""What the desktop (everything on the card but the server) holds while the server runs: its
level at the server's start, its peak, its recent trend, and what the server holds beyond its
budget, measured while nothing squeezes it. The collapse's rule, its report and the KV
remedy read them."""

from __future__ import annotations

from collections import deque

from vramtop.core import sample_facts as read
from vramtop.core.desktop_share import TREND_WINDOW_S, growth_rate
from vramtop.core.diagnosis.suggested_budget import DesktopShare
from vramtop.core.model import Sample, ServerState


class DesktopWatch:
    def __init__(self) -> None:
        # Both outlive a restart: the desktop's peak is what the next budget must leave, and
        # what a server holds beyond its budget does not change with the budget.
        self.peak: int | None = None
        self.outside_budget: int | None = None
        self.new_epoch()

    def new_epoch(self) -> None:
        """A new server start: its own starting level and trend."""
        self.at_start: int | None = None
        # The most this start held beyond its budget; the last start's figure stands until
        # this one is measured.
        self._outside_this_start: int | None = None
        self._history: deque[tuple[float, int]] = deque()

    def track(self, s: Sample, state: ServerState | None, contended: bool) -> None:
        """Take the sample's desktop share (while the server runs); `contended`: a collapse
        is open, so the server's memory beyond its budget is not measured now."""
        desktop = read.desktop_bytes(s)
        if desktop is None or state not in (ServerState.RUNNING, None):
            return
        if self.at_start is None:
            self.at_start = desktop
        self.peak = max(self.peak or 0, desktop)
        history = self._history
        history.append((s.t, desktop))
        while history and history[0][0] < s.t - TREND_WINDOW_S:
            history.popleft()
        split = s.split
        if split and split.server_bytes and split.budget_bytes and not contended:
            self._measure_outside(split.server_bytes - split.budget_bytes)

    def _measure_outside(self, beyond: int) -> None:
        """What this server holds beyond its budget: the most seen since it started. The
        desktop pushing the server's memory out (WDDM's eviction, AMD's GTT) lowers what the
        server holds a tick at a time, before a collapse is named: that is not memory the
        server gave back (it takes it again), and taken as the figure it overstated every
        budget's headroom. Below its budget (pushed out, or not filled yet) it says nothing."""
        if beyond < 0:
            return
        self._outside_this_start = max(self._outside_this_start or 0, beyond)
        self.outside_budget = self._outside_this_start

    def share(self) -> DesktopShare:
        return DesktopShare(
            self.at_start, self.peak, self.outside_budget, growth_rate(self._history)
        )
