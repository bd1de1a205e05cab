"""The findings a diagnosis keeps: open ones by kind, closed ones, and what changed since the
console (or a recording) last asked. Every rule opens and closes findings here."""

from __future__ import annotations

from dataclasses import replace

from vramtop.core.findings import Change, Finding, FindingChange, Kind, Report


class FindingBook:
    def __init__(self) -> None:
        self._open: dict[Kind, Finding] = {}
        self._closed: list[Finding] = []
        self._changes: list[FindingChange] = []

    def is_open(self, kind: Kind) -> bool:
        return kind in self._open

    def get(self, kind: Kind) -> Finding | None:
        """The open finding of `kind` (None: none is open)."""
        return self._open.get(kind)

    def set(self, kind: Kind, t: float, report: Report) -> None:
        """Open `kind` at `t`, or refresh the open one with newer numbers (`report`: what the
        kind's module says of it now)."""
        current = self._open.get(kind)
        if current is None:
            finding = Finding.opened(kind, t, report)
            self._open[kind] = finding
            self._changes.append(FindingChange(Change.OPENED, finding))
        else:
            self._open[kind] = current.refreshed(t, report)

    def close(self, kind: Kind, t: float) -> None:
        current = self._open.pop(kind, None)
        if current is not None:
            closed = replace(current, closed_t=max(t, current.last_seen_t))
            self._closed.append(closed)
            self._changes.append(FindingChange(Change.CLOSED, closed))

    def open_findings(self) -> list[Finding]:
        return sorted(self._open.values(), key=lambda f: f.first_seen_t)

    def all_findings(self) -> list[Finding]:
        """Closed and open findings, in the order they were first seen."""
        return sorted([*self._closed, *self._open.values()], key=lambda f: f.first_seen_t)

    def take_changes(self) -> list[FindingChange]:
        """Findings opened or closed since the last call (for a banner or a `finding` event)."""
        changes, self._changes = self._changes, []
        return changes
