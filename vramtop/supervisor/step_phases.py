"""A step's phases for its timeline event: the moments vramtop saw itself (`StepClock`: held,
drained, stopped, memory released, launched, ready) and what vLLM's log says of the start the
step made (`core.vllm.start_phases`), read from the record's log since that start's offset."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from vramtop.core.json_types import JsonObject
from vramtop.core.vllm.log_run import last_run
from vramtop.core.vllm.start_phases import parse_start_phases
from vramtop.supervisor.readiness import tail
from vramtop.supervisor.state import ServerRecord

# A start's log is some hundred lines (a few KiB); this bounds the read of a log that
# carries far more (a chatty start, requests logged since).
READ_LIMIT = 1024 * 1024

# The moments of a step, in the order they come; each phase is the seconds from the moment
# before it that was seen (a start has no hold nor stop: its launch counts from the step's
# beginning). `held`: the door answered the hold (the drain of the answers begun included).
MOMENTS = ("began", "held", "sigterm", "exited", "memory_released", "launched", "ready")
# The moment that ends each phase, and the phase's name in the event (`sigterm` ends none:
# the stop counts from it).
PHASE_ENDED_BY = {
    "held": "held_s",
    "exited": "stopped_s",
    "memory_released": "memory_released_s",
    "launched": "launched_s",
    "ready": "ready_s",
}


class StepClock:
    """The moments of the step under way (a start, restart or relaunch), by a monotonic clock:
    `begin` at its start, `mark` as each moment comes (the first of each counts; none before
    `begin`), `phases` at its end."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._at: dict[str, float] = {}

    def begin(self) -> None:
        self._at = {"began": self._clock()}

    def mark(self, moment: str) -> None:
        if self._at and moment in MOMENTS:
            self._at.setdefault(moment, self._clock())

    def phases(self) -> JsonObject:
        """The step's phases in seconds, the ones seen (`total_s`: from its beginning to its
        last moment); taken once: the clock is idle until the next `begin`."""
        at, self._at = self._at, {}
        out: JsonObject = {}
        if not at:
            return out
        since = at["began"]
        for moment in MOMENTS[1:]:
            if moment not in at:
                continue
            name = PHASE_ENDED_BY.get(moment)
            if name is not None:
                out[name] = round(at[moment] - since, 3)
            since = at[moment]
        if len(at) > 1:
            out["total_s"] = round(max(at.values()) - at["began"], 3)
        return out


def start_phases(rec: ServerRecord | None) -> JsonObject:
    """The phases of the record's start as its log tells them (weights, compilation, graphs,
    engine set-up, log's start → ready), the known ones only; empty without a log."""
    if rec is None or rec.log_path is None:
        return {}
    lines = tail(Path(rec.log_path), rec.log_offset, READ_LIMIT)
    return parse_start_phases(last_run(lines)).fields()
