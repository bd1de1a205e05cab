"""`vramtop replay FILE`: a recorded session played through the console.

The console gets a backend whose samples come from the file, paced by a speed factor, and
whose findings come from the same diagnosis the live console runs. Nothing can be started or
stopped: it is a recording.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from vramtop.core.diagnosis.normal_rate import NormalRate
from vramtop.core.diagnosis.throughput import ThroughputView
from vramtop.core.findings import Finding
from vramtop.core.headroom.live_inputs import live_headroom_inputs
from vramtop.core.headroom.terms import HeadroomInputs
from vramtop.core.model import GpuReading, Rates, Sample
from vramtop.core.server_events import Event
from vramtop.machines.interface import LOG_TAIL, Frame, WatchOnly
from vramtop.session.playback import ReplaySource
from vramtop.session.session_reader import Record

READ_ONLY = "This is a recording: nothing can be started or stopped. Run vramtop to act."


class ReplayBackend(WatchOnly):
    """A `Backend` over a session file: nothing to start, stop or relaunch."""

    cannot_act = READ_ONLY
    recorded = True
    demo = False
    session = None  # the file's own diagnosis, no live session

    def __init__(
        self,
        path: Path,
        speed: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = ReplaySource(path, speed=speed)  # SessionError on an unreadable file
        self._path, self._speed = path, speed
        self.profile_name: str | None = f"replay of {path.name} ×{speed:g}"
        self._name = path.name
        self.wsl = bool(self.source.header.wsl)
        self._clock = clock
        # Where the playback stands, in seconds of playback: it moves with the clock while
        # playing, and stands while paused (Space) or stepped (← →).
        self._position_s = 0.0
        self._clock_at = clock()
        self.paused = False
        self._events: list[Event] = []
        self._log: list[str] = []
        self._sample_ts: list[float] = []  # the times of the samples shown, for a step back
        self._empty = Sample(t=0.0, gpu=GpuReading(source="recording", error="no sample yet"))

    @property
    def finished(self) -> bool:
        return self.source.finished

    def tick(self, log_limit: int = LOG_TAIL) -> Frame:
        sample = self._advance()
        return Frame(
            sample=sample,
            findings=tuple(self.findings()),
            events=tuple(self.events()),
            log_lines=tuple(self.log_lines(log_limit)) if log_limit > 0 else (),
            headroom_inputs=self.headroom_inputs(),
            normal=self.normal_rates(),
            normal_rate=self.normal_rate(),
            throughput=self.throughput(),
            outside_budget_bytes=self.outside_budget_bytes(),
        )

    # -- the person's controls: pause, step -----------------------------------------------
    def toggle_pause(self) -> bool:
        """Pause the playback, or play on from where it stands; returns whether paused."""
        self._follow_clock()
        self.paused = not self.paused
        return self.paused

    def step(self, forward: bool) -> bool:
        """Pause, and move one recorded sample forward or back; False where there is none
        that way (the first sample, the end of the file)."""
        self._follow_clock()
        self.paused = True
        if forward:
            if self.source.finished:
                return False
            self._take(self.source.next_sample())
        else:
            if len(self._sample_ts) < 2:
                return False
            self._rewind_to(self._sample_ts[-2])
        latest = self.source.latest
        if latest is not None:
            self._position_s = self.source.elapsed_at(latest.t)
        return True

    def _follow_clock(self) -> None:
        now = self._clock()
        if not self.paused:
            self._position_s += now - self._clock_at
        self._clock_at = now

    def _rewind_to(self, t: float) -> None:
        """Read the file again from its start up to the sample of time `t` (the diagnosis
        too: the findings are those open then)."""
        self.source = ReplaySource(self._path, speed=self._speed)
        self._events, self._log, self._sample_ts = [], [], []
        self.profile_name = f"replay of {self._name} ×{self._speed:g}"
        while (latest := self.source.latest) is None or latest.t < t:
            records = self.source.next_sample()
            if not records:
                break
            self._take(records)

    def _advance(self) -> Sample:
        self._follow_clock()
        self._take(self.source.advance(self._position_s))
        return self._latest()

    def _take(self, records: list[Record]) -> None:
        for record in records:
            if isinstance(record, Sample):
                self._sample_ts.append(record.t)
            if isinstance(record, Event):
                self._events.append(record)
                line, last = record.detail.get("line"), record.detail.get("last_lines")
                if record.name == "log" and isinstance(line, str):
                    self._log.append(line)
                for each in last if isinstance(last, list | tuple) else ():
                    self._log.append(str(each))

    def _latest(self) -> Sample:
        latest = self.source.latest
        if self.source.finished:
            # The last frame stays up: say it is the end of the file, not a live server.
            end = f"{latest.t:.0f}s" if latest is not None else "the start"
            # Without the speed: at 80 columns the end matters more than how fast it ran.
            self.profile_name = f"replay of {self._name} ended at {end}"
        return latest or self._empty

    def findings(self) -> list[Finding]:
        return self.source.diagnoser.open_findings()

    def events(self) -> list[Event]:
        return list(self._events)

    def normal_rates(self) -> Rates:
        return Rates(generation_tps=self.source.diagnoser.normal_generation_tps())

    def normal_rate(self) -> NormalRate | None:
        return self.source.diagnoser.normal_rate()

    def throughput(self) -> ThroughputView | None:
        return self.source.diagnoser.throughput

    def outside_budget_bytes(self) -> int | None:
        return self.source.diagnoser.outside_budget_bytes

    def headroom_inputs(self) -> HeadroomInputs | None:
        latest = self.source.latest
        if latest is None:
            return None
        return live_headroom_inputs(latest, self.source.diagnoser.outside_budget_bytes)

    def log_lines(self, limit: int = 500) -> list[str]:
        return self._log[-limit:]

    def close(self, stop_server: bool) -> None:
        pass
