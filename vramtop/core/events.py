"""What happened to the server, when: one type for the live console, a recording and a replay.

The names are the session format's (`start`, `ready`, `stop`, `restart`, `relaunch`, `exit`,
`log`, `finding`); `detail` holds each event's own values as the format writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    """One event at `t` (seconds, on the session's clock)."""

    t: float
    name: str
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The event line of the session format."""
        return {"t": self.t, "event": self.name, "detail": dict(self.detail)}
