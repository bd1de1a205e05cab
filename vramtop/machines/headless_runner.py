"""The headless runner: a backend ticked at an interval, each tick's frame with what changed
since the last one (findings opened and closed, matched by id; the session's new events).

The guard runs on it; so can any watcher without a screen. `clock` and `sleep` are injectable
(tests, and a stop that interrupts the wait: pass an `Event.wait`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from vramtop.core.findings import Finding, finding_id
from vramtop.core.server_events import Event
from vramtop.machines.interface import Frame, FrameSource

log = logging.getLogger(__name__)

# Ticks that fail in a row before `run` gives up (the last one's error goes up).
MAX_FAILURES = 10


@dataclass(frozen=True)
class TickNews:
    """One tick: its frame, the findings that opened and closed since the previous tick (a
    closed one as the diagnosis closed it, where the backend keeps it), and the events the
    session gained."""

    frame: Frame
    opened: tuple[Finding, ...] = ()
    closed: tuple[Finding, ...] = ()
    new_events: tuple[Event, ...] = ()


class Runner:
    """Ticks `backend` every `interval_s` (of `clock`) and reports each tick's news."""

    def __init__(
        self,
        backend: FrameSource,
        *,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be more than 0 (got {interval_s!r})")
        self.backend = backend
        self.interval_s = interval_s
        self._clock = clock
        self._sleep = sleep
        self._open: dict[str, Finding] = {}
        self._last_event: Event | None = None
        self.ticks = 0

    def tick(self, log_limit: int = 0) -> TickNews:
        """Tick once (with up to `log_limit` of the server's log lines: the console shows
        them); what changed since the previous tick."""
        frame = self.backend.tick(log_limit=log_limit)
        now = {finding_id(f): f for f in frame.findings}
        opened = tuple(f for key, f in now.items() if key not in self._open)
        gone = [f for key, f in self._open.items() if key not in now]
        self._open = now
        self.ticks += 1
        return TickNews(frame, opened, tuple(self._closed(gone)), self._new_events(frame.events))

    def run(
        self,
        should_stop: Callable[[], bool],
        on_tick: Callable[[TickNews], None],
        *,
        on_error: Callable[[Exception], None] | None = None,
        max_failures: int | None = MAX_FAILURES,
    ) -> None:
        """Tick, hand each tick's news to `on_tick`, wait out the rest of the interval; until
        `should_stop()` (asked before each tick and after each wait).

        A tick that raises is logged with its traceback and the next one tried: a watcher
        that runs for hours outlives one bad tick. `max_failures` in a row raise the last
        (None: never; the exporter samples as long as it serves). `on_error` is told of each
        failed tick (the exporter counts them)."""
        failures = 0
        while not should_stop():
            began = self._clock()
            try:
                on_tick(self.tick())
                failures = 0
            except Exception as exc:
                failures += 1
                if on_error is not None:
                    on_error(exc)
                if max_failures is not None and failures >= max_failures:
                    raise
                log.exception("a tick failed (%d in a row); the next one is tried", failures)
            if should_stop():
                return
            self._sleep(max(0.0, self.interval_s - (self._clock() - began)))

    def _closed(self, gone: list[Finding]) -> list[Finding]:
        """The closed version of each finding no longer open (its `closed_t` set), where the
        backend's session keeps it; else the last open version seen."""
        if not gone:
            return []
        session = self.backend.session
        every = session.all_findings() if session is not None else []
        closed = {finding_id(f): f for f in every if not f.is_open}
        return [closed.get(finding_id(f), f) for f in gone]

    def _new_events(self, events: tuple[Event, ...]) -> tuple[Event, ...]:
        """The events after the last one seen. The session keeps a bounded list, so the last
        one seen is found by identity (equal events at one time are still two events)."""
        last = self._last_event
        if events:
            self._last_event = events[-1]
        if last is None:
            return events
        for index in range(len(events) - 1, -1, -1):
            if events[index] is last:
                return events[index + 1 :]
        return events  # the last one seen has left the bounded list: all are new
