"""A live monitoring session: what it knows beyond the latest sample.

The server's lifecycle as events (derived from its state, plus the actions vramtop itself
took), the findings the diagnosis opens and closes, and — when recording — the session file
(the session's journal), and the normal rate remembered between runs (its normal memory).
The console and `vramtop record` both run their ticks through one of these, so what the
console shows and what a recording holds are the same thing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.diagnosis.normal_rate import NormalRate
from vramtop.core.diagnosis.throughput import ThroughputView
from vramtop.core.findings import Finding
from vramtop.core.json_types import JsonObject
from vramtop.core.model import Sample, ServerState
from vramtop.core.server_events import Event, EventName, ServerAction
from vramtop.core.windows.spill import SpillEvidence
from vramtop.session.journal import SessionJournal
from vramtop.session.normal_memory import NormalMemory
from vramtop.session.normal_store import NormalRateStore
from vramtop.session.writer import SessionWriter

LAST_LINES = 20  # log lines kept with an `exit` event


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
        self._journal = SessionJournal(writer)
        self._log_lines = log_lines
        # Remembered normal rates: loaded when the server's setup becomes known, saved as
        # this run learns its own (None: nothing is remembered, e.g. in tests).
        self._normal = NormalMemory(self.diagnoser, normal_store)
        self._previous: Sample | None = None
        self._lock = threading.Lock()

    @property
    def recording(self) -> bool:
        return self._journal.writer is not None

    @property
    def recording_error(self) -> str | None:
        """Why the recording stopped part-way (a full disk); None while it goes on, or none
        ran."""
        return self._journal.error

    def record_to(self, writer: SessionWriter | None) -> None:
        """Write every later sample, event and finding to `writer`; None stops recording
        (the caller closes its writer)."""
        with self._lock:
            self._journal.writer = writer

    def observe(self, sample: Sample) -> None:
        with self._lock:
            for event in lifecycle_events(self._previous, sample):
                detail = dict(event.detail)
                if event.name == EventName.EXIT and self._log_lines is not None:
                    detail.setdefault("last_lines", self._log_lines(LAST_LINES))
                self._journal.event(event.t, event.name, detail)
                self.diagnoser.feed_event(event.t, event.name, detail)
            self._journal.sample(sample)
            self.diagnoser.feed_sample(sample)
            self._normal.sync(sample.t)
            self._journal.findings(sample.t, self.diagnoser.take_changes())
            self._journal.check_writes(sample.t)
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
            self._journal.event(t, name, detail)
            if result in (None, "ok"):
                self.diagnoser.feed_event(t, name, detail)
            if result == "ok":
                # (Recorded after its ready, which a tick may have seen first: the exit this
                # relaunch planned is behind it, and a later one is a crash again.)
                self.diagnoser.feed_event(t, EventName.READY, {})
            self._journal.findings(t, self.diagnoser.take_changes())
            self._journal.check_writes(t)

    def findings(self) -> list[Finding]:
        with self._lock:
            return self.diagnoser.open_findings()

    def all_findings(self) -> list[Finding]:
        with self._lock:
            return self.diagnoser.all_findings()

    def events(self) -> list[Event]:
        with self._lock:
            return list(self._journal.events)

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
            self._normal.save(None, force=True)
            self._journal.close()
