"""Playing a recorded session back at a chosen speed, for the console (`vramtop replay`).

Two ways to drive it:
- iterate it: records come out paced by the recording's own times divided by `speed`
  (it sleeps between them; `speed=0` means as fast as possible);
- call `advance(elapsed_s)` from a timer: it returns the records whose time has come after
  `elapsed_s` seconds of playback, without sleeping (the console's timer passes the time in).

Each sample and event also goes through a `Diagnoser`, so the console can show the banner a
live session would have shown (`source.diagnoser.take_changes()`). Recorded `finding` events
are passed on but not fed back into the diagnosis.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.model import Sample
from vramtop.core.server_events import EventName
from vramtop.session.recorded_sample import SessionHeader
from vramtop.session.session_reader import Record, SessionReader


class ReplaySource:
    """A recorded session as a stream of `Sample`s and `Event`s."""

    def __init__(
        self,
        path: str | Path,
        speed: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if speed < 0:
            raise ValueError("speed must be 0 (as fast as possible) or positive")
        self._reader = SessionReader(path)  # raises SessionError on an unreadable file
        self.header: SessionHeader = self._reader.header
        self.speed = speed
        self._sleep = sleep
        self.diagnoser = Diagnoser(remembered=self.header.normal_rate)
        self._pending: Iterator[Record] = self._reader.records()
        self._next: Record | None = None
        self._start_t: float | None = None
        self.finished = False
        self.latest: Sample | None = None

    def _peek(self) -> Record | None:
        if self._next is None and not self.finished:
            self._next = next(self._pending, None)
            if self._next is None:
                self.finished = True
        return self._next

    def _take(self) -> Record:
        record = self._next
        assert record is not None
        self._next = None
        if isinstance(record, Sample):
            self.latest = record
            self.diagnoser.feed_sample(record)
        elif record.name != EventName.FINDING:
            self.diagnoser.feed_event(record.t, record.name, record.detail)
        return record

    def __iter__(self) -> Iterator[Record]:
        previous_t: float | None = None
        while (record := self._peek()) is not None:
            if previous_t is not None and self.speed > 0:
                self._sleep(max(0.0, (record.t - previous_t) / self.speed))
            previous_t = record.t
            yield self._take()

    def advance(self, elapsed_s: float) -> list[Record]:
        """The records due after `elapsed_s` seconds of playback (from the first record)."""
        due: list[Record] = []
        while (record := self._peek()) is not None:
            if self._start_t is None:
                self._start_t = record.t
            if self.speed > 0 and record.t - self._start_t > elapsed_s * self.speed:
                break
            due.append(self._take())
        return due

    def next_sample(self) -> list[Record]:
        """The records up to and including the next sample (a step of the replay)."""
        due: list[Record] = []
        while (record := self._peek()) is not None:
            if self._start_t is None:
                self._start_t = record.t
            due.append(self._take())
            if isinstance(record, Sample):
                break
        return due

    def elapsed_at(self, t: float) -> float:
        """The seconds of playback at which the record of time `t` is due."""
        start = self._start_t if self._start_t is not None else t
        return (t - start) / self.speed if self.speed > 0 else 0.0
