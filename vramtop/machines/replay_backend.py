"""`vramtop replay FILE`: a recorded session played through the console.

The console gets a backend whose samples come from the file, paced by a speed factor, and
whose findings come from the same diagnosis the live console runs. Nothing can be started or
stopped: it is a recording. Where the playback stands (playing with the clock, paused,
stepped, rewound) is its `Playback`; what has been played so far, `Played`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from vramtop.core.findings import Finding
from vramtop.core.headroom.live_inputs import live_headroom_inputs
from vramtop.core.model import GpuReading, Rates, Sample
from vramtop.core.server_events import Event
from vramtop.machines.interface import LOG_TAIL, Frame, ServerControl
from vramtop.session.playback import ReplaySource
from vramtop.session.session_reader import Record

READ_ONLY = "This is a recording: nothing can be started or stopped. Run vramtop to act."


class Played:
    """What a recording's playback has shown so far: its events, the server's log lines
    they carry, and the times of its samples (for a step back)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.log: list[str] = []
        self.sample_ts: list[float] = []

    def take(self, records: list[Record]) -> None:
        for record in records:
            if isinstance(record, Sample):
                self.sample_ts.append(record.t)
            if isinstance(record, Event):
                self.events.append(record)
                line, last = record.detail.get("line"), record.detail.get("last_lines")
                if record.name == "log" and isinstance(line, str):
                    self.log.append(line)
                for each in last if isinstance(last, list | tuple) else ():
                    self.log.append(str(each))


class Playback:
    """Where a recording's playback stands, in seconds of playback: it moves with the clock
    while playing, and stands while paused (Space) or stepped (← →). The file is read up to
    there (`source`, with its diagnosis) and what was read is `played`."""

    def __init__(self, path: Path, speed: float, clock: Callable[[], float]) -> None:
        self.source = ReplaySource(path, speed=speed)  # SessionError on an unreadable file
        self._path, self._speed = path, speed
        self.played = Played()
        self._clock = clock
        self._position_s = 0.0
        self._clock_at = clock()
        self.paused = False

    def advance(self) -> None:
        """Read on to where the clock has brought the playback."""
        self._follow_clock()
        self.played.take(self.source.advance(self._position_s))

    def toggle_pause(self) -> bool:
        """Pause the playback, or play on from where it stands; returns whether paused."""
        self._follow_clock()
        self.paused = not self.paused
        return self.paused

    def seek(self, forward: bool) -> bool:
        """Pause, and move one recorded sample forward or back; False where there is none
        that way (the first sample, the end of the file)."""
        self._follow_clock()
        self.paused = True
        if forward:
            if self.source.finished:
                return False
            self.played.take(self.source.next_sample())
        else:
            if len(self.played.sample_ts) < 2:
                return False
            self._rewind_to(self.played.sample_ts[-2])
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
        self.played = Played()
        while (latest := self.source.latest) is None or latest.t < t:
            records = self.source.next_sample()
            if not records:
                break
            self.played.take(records)


class ReplayBackend(ServerControl):
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
        self.playback = Playback(path, speed, clock)  # SessionError on an unreadable file
        self._name, self._speed = path.name, speed
        self.wsl = bool(self.playback.source.header.wsl)
        self._empty = Sample(t=0.0, gpu=GpuReading(source="recording", error="no sample yet"))

    @property
    def source(self) -> ReplaySource:
        """The file as read so far, with its own diagnosis."""
        return self.playback.source

    @property
    def finished(self) -> bool:
        return self.source.finished

    @property
    def profile_name(self) -> str:
        latest = self.source.latest
        if not self.source.finished:
            return f"replay of {self._name} ×{self._speed:g}"
        # The last frame stays up: say it is the end of the file, not a live server. Without
        # the speed: at 80 columns the end matters more than how fast it ran.
        end = f"{latest.t:.0f}s" if latest is not None else "the start"
        return f"replay of {self._name} ended at {end}"

    def tick(self, log_limit: int = LOG_TAIL) -> Frame:
        self.playback.advance()
        latest, diagnosis = self.source.latest, self.source.diagnoser
        outside = diagnosis.outside_budget_bytes
        return Frame(
            sample=latest or self._empty,
            findings=tuple(self.findings()),
            events=tuple(self.events()),
            log_lines=tuple(self.log_lines(log_limit)) if log_limit > 0 else (),
            headroom_inputs=None if latest is None else live_headroom_inputs(latest, outside),
            normal=Rates(generation_tps=diagnosis.normal_generation_tps()),
            normal_rate=diagnosis.normal_rate(),
            throughput=diagnosis.throughput,
            outside_budget_bytes=outside,
        )

    # -- the person's controls: pause, seek -----------------------------------------------
    def toggle_pause(self) -> bool:
        """Pause the playback, or play on from where it stands; returns whether paused."""
        return self.playback.toggle_pause()

    def seek(self, forward: bool) -> bool:
        """Pause, and move one recorded sample forward or back; False where there is none
        that way (the first sample, the end of the file)."""
        return self.playback.seek(forward)

    # -- what has been played -------------------------------------------------------------
    def findings(self) -> list[Finding]:
        return self.source.diagnoser.open_findings()

    def events(self) -> list[Event]:
        return list(self.playback.played.events)

    def log_lines(self, limit: int = 500) -> list[str]:
        return self.playback.played.log[-limit:]

    def close(self, stop_server: bool) -> None:
        pass
