"""The event log as a session sees it: the findings that opened and closed, written
by whoever holds the actor lock (the guard, or a console when no guard runs), and the events
of earlier runs, read back for the console's timeline.

The file itself (`EventLog`: JSON lines per profile, bounded and rotated) lives below the
supervisor and the session, in `vramtop/event_log.py`, since the supervisor writes its
actions there too; it is named here as well, for the session's callers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from vramtop.core.findings import Finding, finding_id
from vramtop.core.json_types import JsonObject
from vramtop.core.news import CLOSED, OPENED
from vramtop.core.server_events import Event
from vramtop.event_log import EventLog, path_for

__all__ = [
    "CONSOLE_TOLD",
    "GUARD_TOLD",
    "TOLD_BY",
    "EventLog",
    "finding_detail",
    "path_for",
    "record_findings",
]

FINDING = "finding"
# Who told a finding (a `finding` event's `told_by`): the console or the guard acting for the
# profile. A guard that takes over does not tell again what a console told while the same
# server ran; an opening by an earlier guard (or an older vramtop) is told again.
TOLD_BY = "told_by"
CONSOLE_TOLD, GUARD_TOLD = "console", "guard"


def finding_detail(finding: Finding, change: str) -> JsonObject:
    """A `finding` event's detail, as the session writes it to the event log (kind, change,
    summary, duration_s once closed), with its `severity` and `id` added."""
    detail: JsonObject = {
        "kind": finding.kind,
        "change": change,
        "summary": finding.summary,
        "severity": finding.severity,
        "id": finding_id(finding),
    }
    if change == CLOSED and finding.duration_s is not None:
        detail["duration_s"] = round(finding.duration_s, 1)
    return detail


def record_findings(
    log: EventLog,
    now: float,
    opened: Iterable[Finding] = (),
    closed: Iterable[Finding] = (),
    *,
    told_by: str | None = None,
) -> int:
    """Write the findings that opened and closed at `now` (Unix time), each with who told it
    (`told_by`: CONSOLE_TOLD or GUARD_TOLD); how many were written. For the one process that
    holds the actor lock: the guard, or a console."""
    written = 0
    for change, findings in ((OPENED, opened), (CLOSED, closed)):
        for finding in findings:
            detail = finding_detail(finding, change)
            if told_by is not None:
                detail[TOLD_BY] = told_by
            written += log.append(now, FINDING, detail)
    return written


def before_and_since(
    events: Sequence[Event], t: float, limit: int = 500
) -> tuple[list[Event], list[Event]]:
    """`events` (oldest first) split at `t` (Unix time: when a console opened): the last
    `limit` written before it, and the last `limit` written at or after it."""
    before = [e for e in events if e.t < t]
    since = [e for e in events if e.t >= t]
    return before[max(0, len(before) - limit) :], since[max(0, len(since) - limit) :]
