"""What happened to the server, when: one type for the live console, a recording and a replay.

The names are the session format's (`EventName`: `start`, `ready`, `stop`, `restart`,
`relaunch`, `exit`, `log`, `finding`) and vramtop's additions (`guard`, a guard's decision;
`door_restarted`, the front door started again after it died; `recording_failed`, the live
session's recording stopped; `first_served`, the first request the front door answered after
a step's release, tied to the step's event); `detail` holds each event's own values as the
format writes them. `ServerAction` names what vramtop can do to the server (the console's keys, the
supervisor's methods), each of which a session records as the event of the same name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from vramtop.core.json_types import JsonObject, JsonValue


class EventName(StrEnum):
    """The session format's event names, and vramtop's additions (equal to them as strings)."""

    START = "start"
    READY = "ready"
    STOP = "stop"
    RESTART = "restart"
    RELAUNCH = "relaunch"
    EXIT = "exit"
    LOG = "log"
    FINDING = "finding"
    # vramtop's additions (the session format in docs/reference.md names them).
    GUARD = "guard"
    DOOR_RESTARTED = "door_restarted"
    RECORDING_FAILED = "recording_failed"
    FIRST_SERVED = "first_served"


class ServerAction(StrEnum):
    """What vramtop can do to the server, by the name its event is recorded with."""

    START = "start"
    STOP = "stop"
    RESTART = "restart"
    RELAUNCH = "relaunch"


@dataclass(frozen=True)
class Event:
    """One event at `t` (seconds, on the session's clock)."""

    t: float
    name: EventName | str  # an EventName; a newer recording's unknown name stays as it is
    detail: Mapping[str, JsonValue] = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        """The event line of the session format."""
        return {"t": self.t, "event": self.name, "detail": dict(self.detail)}
