"""What a session keeps of what happened: its latest events, for the console and the
timeline, and, while it records, everything written to the session file."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from vramtop.core.findings import FindingChange
from vramtop.core.json_types import JsonObject
from vramtop.core.model import Sample
from vramtop.core.server_events import Event, EventName
from vramtop.session.writer import SessionWriter

EVENTS_KEPT = 1000


class SessionJournal:
    """The last `EVENTS_KEPT` events (`events`) and the recording's `writer` (None: not
    recording). A recording whose writes failed (a full disk) ends, once, with an event that
    says so and its reason in `error`; the events go on."""

    def __init__(self, writer: SessionWriter | None = None) -> None:
        self.writer = writer
        self.events: deque[Event] = deque(maxlen=EVENTS_KEPT)
        # Why the recording stopped part-way (a full disk); None while it goes on, or none ran.
        self.error: str | None = None

    def sample(self, sample: Sample) -> None:
        if self.writer is not None:
            self.writer.sample(sample)

    def event(self, t: float, name: str, detail: JsonObject) -> None:
        self.events.append(Event(t, name, detail))
        if self.writer is not None:
            self.writer.event(t, name, detail)

    def findings(self, t: float, changes: Iterable[FindingChange]) -> None:
        """Each finding opened or closed, as a `finding` event."""
        for change in changes:
            finding = change.finding
            detail: JsonObject = {
                "kind": finding.kind,
                "change": change.change,
                "summary": finding.summary,
            }
            if finding.duration_s is not None:
                detail["duration_s"] = round(finding.duration_s, 1)
            self.events.append(Event(t, EventName.FINDING, detail))
            if self.writer is not None:
                self.writer.finding(t, finding, change.change)

    def check_writes(self, t: float) -> None:
        """End a recording whose writes failed, with a `recording_failed` event at `t`."""
        writer = self.writer
        if writer is None or writer.failed is None:
            return
        self.writer = None
        self.error = f"recording to {writer.path} failed: {writer.failed}"
        self.events.append(
            Event(t, EventName.RECORDING_FAILED, {"path": str(writer.path), "error": writer.failed})
        )

    def close(self) -> None:
        """Stop recording (the writer is closed)."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None
