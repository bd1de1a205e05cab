"""The event log: each profile's events (starts, stops, restarts, relaunches, the
findings that opened and closed) kept in its state directory across vramtop's runs.

JSON lines, `{"t": unix_time, "event": name, "detail": {...}}`, appended by whoever acts
(the supervisor, after an action's outcome) or holds the actor lock (findings). Bounded: once
the file would pass `MAX_BYTES` it becomes `<name>.1` (the one before is dropped) and a new
one begins, so the two together never hold much more than twice that. Written as vramtop
writes every file of its own (0600, no link followed); a damaged line (a crash half-way
through a write, an edit by hand) is skipped and counted, never a reason to fail.

Below the supervisor and the session (both write here), so it imports only `files`,
`locations` and the core.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from vramtop import files, locations, locks
from vramtop.core.server_events import Event

log = logging.getLogger(__name__)

MAX_BYTES = 5 * 1024 * 1024
SUFFIX = ".jsonl"


def path_for(profile: str) -> Path:
    """The profile's event log, in the state directory beside its server's state file."""
    return locations.state_dir() / f"events-{locations.profile_file_name(profile)}{SUFFIX}"


class EventLog:
    """One profile's event log. `append` never raises for a write that fails (a full
    disk, a link planted in its place): the action it records has happened anyway; the
    failure is logged and kept in `error`."""

    def __init__(self, path: Path, *, max_bytes: int = MAX_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.error: str | None = None
        self.skipped = 0  # damaged lines skipped by the last `read`
        self.older = 0  # events the last `read` left out as older than its `since`

    @classmethod
    def for_profile(cls, profile: str) -> EventLog:
        return cls(path_for(profile))

    @property
    def rotated(self) -> Path:
        return self.path.with_name(self.path.name + ".1")

    def append(self, t: float, event: str, detail: Mapping[str, object] | None = None) -> bool:
        """Add one event at `t` (Unix time); False when it could not be written."""
        line = json.dumps(
            {"t": t, "event": event, "detail": dict(detail or {})},
            default=str,
            allow_nan=False,
            separators=(",", ":"),
        )
        data = (line + "\n").encode()
        try:
            files.private_dir(self.path.parent)
            self._write(data)
        except (OSError, ValueError) as exc:
            self.error = f"cannot write {self.path}: {exc}"
            log.warning("%s", self.error)
            return False
        self.error = None
        return True

    def _write(self, data: bytes) -> None:
        fd = files.open_append(self.path)
        try:
            # One writer at a time decides on the rotation (a guard and a console's key).
            locks.hold(fd)
            if _replaced(self.path, fd):  # rotated by another writer while this one waited
                os.close(fd)
                fd = files.open_append(self.path)
                locks.hold(fd)
            if os.fstat(fd).st_size + len(data) > self.max_bytes and os.fstat(fd).st_size > 0:
                os.replace(self.path, self.rotated)
                os.close(fd)
                fd = files.open_append(self.path)
                locks.hold(fd)
            os.write(fd, data)
        finally:
            os.close(fd)

    def read(self, since: float | None = None) -> list[Event]:
        """Every event kept (the rotated file's first), oldest first; only those at or after
        `since` (Unix time) when given, the others counted in `older`. Damaged lines are
        skipped and counted in `skipped`; `files.NotYours` for a file that must not be read (a
        link in its place)."""
        self.skipped = self.older = 0
        events: list[Event] = []
        for path in (self.rotated, self.path):
            for raw in _lines(path):
                event = _parsed(raw)
                if event is None:
                    self.skipped += 1
                elif since is None or event.t >= since:
                    events.append(event)
                else:
                    self.older += 1
        events.sort(key=lambda e: e.t)  # (two writers' lines may land out of order)
        return events


def _replaced(path: Path, fd: int) -> bool:
    """Whether `path` now names another file than the one open as `fd`."""
    try:
        return os.stat(path, follow_symlinks=False).st_ino != os.fstat(fd).st_ino
    except OSError:
        return True


def _lines(path: Path) -> list[bytes]:
    """The file's lines; none when it is not written yet. `files.NotYours` where it must not
    be read (a link, another user's, writable by others): the message names it and the fix,
    rather than an event log that looks empty."""
    try:
        data = locations.read_own(path)
    except FileNotFoundError:
        return []  # not written yet
    return [line for line in data.splitlines() if line.strip()]


# The last Unix time a calendar date can show (9999-12-31): a later `t` is a damaged line.
LATEST_T = 253_402_300_799.0


def _parsed(raw: bytes) -> Event | None:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):  # (nested deeper than the parser recurses)
        return None
    if not isinstance(obj, dict):
        return None
    t, name, detail = obj.get("t"), obj.get("event"), obj.get("detail", {})
    if not isinstance(t, int | float) or isinstance(t, bool) or not 0 <= t <= LATEST_T:
        return None  # not a Unix time a clock could show (NaN, negative, past year 9999)
    if not isinstance(name, str) or not isinstance(detail, dict):
        return None
    return Event(float(t), name, detail)
