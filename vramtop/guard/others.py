"""What the others of the guard's profile did, as the lasting timeline says: the findings a
console told before the guard took over, and the actions a person asked for (a key in a
console, a command in another process) while the guard watches."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vramtop.core.news import OPENED
from vramtop.core.server_events import EventName, ServerAction
from vramtop.core.step_report import ASKER_WORDS
from vramtop.session.finding_events import CONSOLE_TOLD, TOLD_BY

if TYPE_CHECKING:
    from vramtop.core.server_events import Event
    from vramtop.event_log import EventLog

# A person's actions, as the lasting timeline records them (`asked_by`).
PERSON_ACTIONS = tuple(ServerAction)
PERSON = ("key", "command")
_ASKER_WORDS = {who: ASKER_WORDS[who] for who in PERSON}


def told_open_kinds(events: list[Event]) -> dict[str, float]:
    """The finding kinds whose last `finding` event in the lasting timeline is an opening a
    console told (`told_by`), each with when (Unix time): open when this guard took over,
    told already where that was during the server's run the guard finds. An opening the
    guard or an older vramtop wrote is not one a person saw."""
    last: dict[str, Event] = {}
    for event in events:
        if event.name == EventName.FINDING:
            last[str(event.detail.get("kind"))] = event
    return {
        kind: event.t
        for kind, event in last.items()
        if event.detail.get("change") == OPENED and event.detail.get(TOLD_BY) == CONSOLE_TOLD
    }


def asked_by_a_person(event: Event) -> str | None:
    """A person's action in words (`a restart by a key in a console: ok`), or None for any
    other event (the guard's own actions among them)."""
    asked_by = event.detail.get("asked_by")
    if event.name not in PERSON_ACTIONS or not isinstance(asked_by, str):
        return None
    who = _ASKER_WORDS.get(asked_by)
    if who is None:
        return None
    result = event.detail.get("result")
    return f"a {event.name} by {who}" + (f": {result}" if isinstance(result, str) else "")


class TimelineNews:
    """The lasting timeline's events written after `since` (Unix time), each once: the file
    is read again only when its size or time has changed since the last look."""

    def __init__(self, timeline: EventLog, since: float) -> None:
        self._timeline = timeline
        self._since = since
        self._seen: tuple[int, int] | None = None

    def take(self) -> list[Event]:
        try:
            stat = self._timeline.path.stat()
            seen = (stat.st_size, stat.st_mtime_ns)
            if seen == self._seen:
                return []  # nothing written since the last look
            self._seen = seen
            events = self._timeline.read(since=self._since)
        except OSError:
            return []
        fresh = [event for event in events if event.t > self._since]
        if fresh:
            self._since = fresh[-1].t
        return fresh
