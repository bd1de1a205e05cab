"""A live monitoring session: what it knows beyond the latest sample.

The server's lifecycle as events (derived from its state, plus the actions vramtop itself
took), the findings the diagnosis opens and closes, and — when recording — the session file.
The console and `vramtop record` both run their ticks through one of these, so what the
console shows and what a recording holds are the same thing.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.diagnosis.normal_rate import LEARNED, NormalRate
from vramtop.core.diagnosis.throughput import ThroughputView
from vramtop.core.findings import Finding
from vramtop.core.json_types import JsonObject
from vramtop.core.model import Sample, ServerState
from vramtop.core.server_events import Event, EventName, ServerAction
from vramtop.core.windows.spill import SpillEvidence
from vramtop.session.normal_store import NormalRateStore
from vramtop.session.writer import SessionWriter

LAST_LINES = 20  # log lines kept with an `exit` event
EVENTS_KEPT = 1000
SAVE_EVERY_S = 60.0  # a learned normal rate is written to the store at most this often


def lifecycle_events(previous: Sample | None, sample: Sample) -> list[Event]:
    """The session events a change of the server's state stands for (at the sample's t)."""
    before = previous.info.state if previous is not None and previous.info else None
    info, t = sample.info, sample.t
    if info is None or info.state == before:
        return []
    if info.state is ServerState.STARTING:
        return [Event(t, EventName.START)]
    ready = Event(t, EventName.READY, {"ready_s": info.ready_s} if info.ready_s is not None else {})
    if info.state is ServerState.RUNNING and before is ServerState.STARTING:
        return [ready]
    if info.state is ServerState.RUNNING and before in (ServerState.STOPPED, ServerState.CRASHED):
        return [Event(t, EventName.START), ready]  # it started and became ready between two ticks
    if info.state in (ServerState.STOPPED, ServerState.CRASHED) and before in (
        ServerState.RUNNING,
        ServerState.STARTING,
        ServerState.STOPPING,
    ):
        detail: JsonObject = {"returncode": info.returncode}
        if info.last_error:
            detail["last_lines"] = [info.last_error]
        exit_ = Event(t, EventName.EXIT, detail)
        if info.state is ServerState.STOPPED and before is not ServerState.STOPPING:
            # Only a stop writes "stopped" (an exit nobody asked for is "crashed"): one that
            # began and ended between two ticks (another shell's `vramtop stop`) is a stop.
            return [Event(t, EventName.STOP, {"reason": "observed"}), exit_]
        return [exit_]
    if info.state is ServerState.STOPPING:
        # A stop under way, whatever it stops: one of a server still loading (another shell's
        # `vramtop stop`) is a stop too, and its exit, seen next, was asked for.
        return [Event(t, EventName.STOP, {"reason": "observed"})]
    return []


class LiveSession:
    """Thread-safe: ticks arrive from a worker thread, actions from another."""

    def __init__(
        self,
        writer: SessionWriter | None = None,
        log_lines: Callable[[int], list[str]] | None = None,
        normal_store: NormalRateStore | None = None,
    ) -> None:
        self.diagnoser = Diagnoser()
        self._writer = writer
        self._log_lines = log_lines
        # Remembered normal rates: loaded when the server's setup becomes known, saved as
        # this run learns its own (None: nothing is remembered, e.g. in tests).
        self._store = normal_store
        self._loaded_key: str | None = None
        self._saved: tuple[str, float] | None = None  # key, sample t of the last save
        self._previous: Sample | None = None
        self._events: deque[Event] = deque(maxlen=EVENTS_KEPT)
        self._lock = threading.Lock()
        # Why the recording stopped part-way (a full disk); None while it goes on, or none ran.
        self.recording_error: str | None = None

    @property
    def recording(self) -> bool:
        return self._writer is not None

    def record_to(self, writer: SessionWriter | None) -> None:
        """Write every later sample, event and finding to `writer`; None stops recording
        (the caller closes its writer)."""
        with self._lock:
            self._writer = writer

    def observe(self, sample: Sample) -> None:
        with self._lock:
            for event in lifecycle_events(self._previous, sample):
                detail = dict(event.detail)
                if event.name == EventName.EXIT and self._log_lines is not None:
                    detail.setdefault("last_lines", self._log_lines(LAST_LINES))
                self._event(event.t, event.name, detail)
            if self._writer is not None:
                self._writer.sample(sample)
            self.diagnoser.feed_sample(sample)
            self._sync_normal(sample.t)
            self._take_changes(sample.t)
            self._check_recording(sample.t)
            self._previous = sample

    def action(self, t: float, name: str, detail: JsonObject) -> None:
        """An action vramtop takes (restart, relaunch, stop): planned, never a crash.

        A relaunch is recorded once it has answered, with its `result`: one whose new server
        serves ("ok") is a new server for the diagnosis (what the old one had open closes,
        a vram_contention finding among them), and it is ready already; one that failed or
        went back to the previous flags changed nothing the diagnosis judges, and closes
        nothing."""
        with self._lock:
            result = detail.get("result") if name == ServerAction.RELAUNCH else None
            self._event(t, name, detail, diagnosed=result in (None, "ok"))
            if result == "ok":
                # (Recorded after its ready, which a tick may have seen first: the exit this
                # relaunch planned is behind it, and a later one is a crash again.)
                self.diagnoser.feed_event(t, EventName.READY, {})
            self._take_changes(t)
            self._check_recording(t)

    def _check_recording(self, t: float) -> None:
        """A recording whose writes failed (a full disk) ends, once, with an event that says
        so (`recording_failed`, for the console and the timeline); the live view goes on."""
        writer = self._writer
        if writer is None or writer.failed is None:
            return
        self._writer = None
        self.recording_error = f"recording to {writer.path} failed: {writer.failed}"
        self._events.append(
            Event(t, EventName.RECORDING_FAILED, {"path": str(writer.path), "error": writer.failed})
        )

    def findings(self) -> list[Finding]:
        with self._lock:
            return self.diagnoser.open_findings()

    def all_findings(self) -> list[Finding]:
        with self._lock:
            return self.diagnoser.all_findings()

    def events(self) -> list[Event]:
        with self._lock:
            return list(self._events)

    def normal_generation_tps(self) -> float | None:
        with self._lock:
            return self.diagnoser.normal_generation_tps()

    def spill_evidence(self) -> SpillEvidence | None:
        with self._lock:
            return self.diagnoser.spill_evidence()

    def normal_rate(self) -> NormalRate | None:
        """The normal decode speed compared with now, and where it came from (learned on
        this run, or remembered with when): for the header, `--once`, recordings, exporters."""
        with self._lock:
            return self.diagnoser.normal_rate()

    def throughput(self) -> ThroughputView | None:
        """The latest sample's rates against the normal, worked out once (see
        `core.diagnosis.throughput`): for the console, `--once`, exporters."""
        with self._lock:
            return self.diagnoser.throughput

    def close(self) -> None:
        with self._lock:
            self._save_normal(None, force=True)
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    def _sync_normal(self, t: float) -> None:
        key = self.diagnoser.decode_key
        if self._store is None or key is None:
            return
        if key != self._loaded_key:
            self._loaded_key = key
            remembered = self._store.load(key)
            if remembered is not None:
                self.diagnoser.remember(remembered)
        self._save_normal(t)

    def _save_normal(self, t: float | None, force: bool = False) -> None:
        """Write the normal learned on this run (a remembered one is already stored): as soon
        as it is known, then at most every `SAVE_EVERY_S`, and when the session closes."""
        key = self.diagnoser.decode_key
        normal = self.diagnoser.normal_rate()
        if self._store is None or key is None or normal is None or normal.source != LEARNED:
            return
        last = self._saved
        recent = (
            last is not None and last[0] == key and t is not None and t - last[1] < SAVE_EVERY_S
        )
        if recent and not force:
            return
        self._store.save(key, normal)
        self._saved = (key, t if t is not None else 0.0)

    def _event(self, t: float, name: str, detail: JsonObject, diagnosed: bool = True) -> None:
        self._events.append(Event(t, name, detail))
        if self._writer is not None:
            self._writer.event(t, name, detail)
        if diagnosed:
            self.diagnoser.feed_event(t, name, detail)

    def _take_changes(self, t: float) -> None:
        for change in self.diagnoser.take_changes():
            finding = change.finding
            detail: JsonObject = {
                "kind": finding.kind,
                "change": change.change,
                "summary": finding.summary,
            }
            if finding.duration_s is not None:
                detail["duration_s"] = round(finding.duration_s, 1)
            self._events.append(Event(t, EventName.FINDING, detail))
            if self._writer is not None:
                self._writer.finding(t, finding, change.change)
