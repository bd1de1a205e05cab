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
from vramtop.core.events import Event
from vramtop.core.findings import Finding
from vramtop.core.headroom.live import live_headroom_inputs
from vramtop.core.headroom.terms import HeadroomInputs
from vramtop.core.model import GpuReading, Rates, Sample
from vramtop.machines.interface import LOG_TAIL, Frame, WatchOnly
from vramtop.session.playback import ReplaySource

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
        self.profile_name: str | None = f"replay of {path.name} ×{speed:g}"
        self._name = path.name
        self.wsl = bool(self.source.header.wsl)
        self._clock = clock
        self._started = clock()
        self._events: list[Event] = []
        self._log: list[str] = []
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

    def _advance(self) -> Sample:
        for record in self.source.advance(self._clock() - self._started):
            if isinstance(record, Event):
                self._events.append(record)
                line, last = record.detail.get("line"), record.detail.get("last_lines")
                if record.name == "log" and isinstance(line, str):
                    self._log.append(line)
                for each in last if isinstance(last, list | tuple) else ():
                    self._log.append(str(each))
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
