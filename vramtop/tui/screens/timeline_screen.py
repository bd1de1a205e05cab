"""The session's events: starts, restarts, relaunches, findings with their durations.

A row is one line, cut at the table's width; Enter on it shows the whole event. Above them,
the profile's lasting timeline from before this console opened (earlier runs, a guard, a
command), marked `earlier` and timed by the clock (their `t` is Unix time, not the session's).
That file (up to twice 5 MB) is read in a thread: the screen opens at once with the session's
own events, and the profile's join them when read.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, Static
from textual.worker import Worker, WorkerState

from vramtop.core.server_events import Event
from vramtop.tui.format import duration, ready_time
from vramtop.tui.widgets.measured_table import MeasuredTable


class TimelineScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,e,q", "close", "Close")]

    def __init__(
        self,
        events: list[Event],
        earlier: list[Event] | None = None,
        acted: list[Event] | None = None,
        actor: str = "guard",
        *,
        lasting: Callable[[], tuple[list[Event], list[Event]]] | None = None,
    ) -> None:
        """`earlier`: the profile's events from before this console opened; `acted`: what
        the process acting for the profile (`actor`, a guard) wrote since; `lasting`: reads
        both (in a thread, once the screen is shown) instead."""
        super().__init__()
        self._earlier = list(earlier or [])
        self._acted = list(acted or [])
        self._actor = actor
        self._session_events = events
        self._lasting = lasting
        self.lasting_read = lasting is None  # the profile's events are in the table

    @property
    def _events(self) -> list[Event]:
        """The table's rows, in order."""
        return [*self._earlier, *self._acted, *self._session_events]

    def compose(self) -> ComposeResult:
        with Vertical(id="timeline", classes="dialog"):
            yield Label(self._empty_words(), id="timeline-empty")
            yield MeasuredTable(cursor_type="row", zebra_stripes=True)
            yield Label(
                Content.styled("enter shows the whole event · esc closes", "$text-muted"),
                id="timeline-keys",
            )

    def _empty_words(self) -> str:
        """What the line above the table says: why it is empty, or what is still being read."""
        if not self.lasting_read:
            reading = "reading the profile's earlier events …"
            return reading if self._session_events else f"No events yet in this session; {reading}"
        if self._session_events:
            return ""
        if self._earlier:
            return (
                "No events yet in this session; the earlier ones are the profile's, from before it."
            )
        return "No events yet in this session."

    def on_mount(self) -> None:
        self.query_one("#timeline").border_title = "Event timeline"
        table = self.query_one(DataTable)
        table.add_columns("at", "event", "what")
        self._fill(table)
        table.focus()
        if self._lasting is not None:
            self.run_worker(self._lasting, thread=True, name="lasting timeline")

    def _fill(self, table: DataTable[Any]) -> None:
        table.clear()
        for event in self._earlier:
            table.add_row(_clock(event.t), f"{event.name} (earlier)", describe(event))
        for event in self._acted:
            table.add_row(_clock(event.t), f"{event.name} ({self._actor})", describe(event))
        for event in self._session_events:
            table.add_row(_at(event.t), event.name, describe(event))
        empty = self._empty_words()
        self.query_one("#timeline-empty", Label).update(empty)
        self.query_one("#timeline-empty").display = bool(empty)
        self.query_one("#timeline-keys").display = bool(self._events)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state not in (WorkerState.SUCCESS, WorkerState.ERROR):
            return
        result = event.worker.result if event.state == WorkerState.SUCCESS else None
        self._earlier, self._acted = result if result is not None else ([], [])
        self.lasting_read = True
        table = self.query_one(DataTable)
        row = table.cursor_row  # the same session event stays under the cursor
        self._fill(table)
        table.move_cursor(row=row + len(self._earlier) + len(self._acted))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self._events):
            self.app.push_screen(EventScreen(self._events[event.cursor_row]))

    def action_close(self) -> None:
        self.dismiss(None)


class EventScreen(ModalScreen[None]):
    """One event, whole: what the timeline row says, wrapped, and every field it carries."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,q", "close", "Close")]

    def __init__(self, event: Event) -> None:
        super().__init__()
        self._event = event

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="event", classes="dialog"):
            yield Static(event_text(self._event))

    def on_mount(self) -> None:
        self.query_one("#event").border_title = f"{self._event.name} at {_at(self._event.t)}"

    def action_close(self) -> None:
        self.dismiss(None)


def event_text(event: Event) -> Content:
    """The event's description, then each of its fields (a finding's ladder, one per line)."""
    parts: list[str | tuple[str, str]] = [describe(event)]
    for key, value in event.detail.items():
        if isinstance(value, dict):
            for inner, text in value.items():
                parts += ["\n", (f"{key} {inner}: ", "bold"), _words(text)]
        else:
            parts += ["\n", (f"{key}: ", "bold"), _words(value)]
    return Content.assemble(*parts)


def _words(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "; ".join(str(v) for v in value)
    return str(value)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _clock(t: float) -> str:
    """An earlier event's Unix time as the local clock read then: `12-01 14:02`."""
    try:
        return datetime.fromtimestamp(t).strftime("%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return "—"


def _at(t: Any) -> str:
    seconds = _number(t)
    return "—" if seconds is None else duration(seconds)


_RELAUNCH_RESULTS = {
    "ok": "served",
    "rolled_back": "did not start: the previous flags serve again",
    "failed": "did not start",
}


def _relaunch_words(detail: Any) -> str:
    """`budget 0.85 · max-model-len 163,840 · served`: the flags changed and the outcome."""
    parts: list[str] = []
    budget = _number(detail.get("gpu_memory_utilization"))
    if budget is not None:
        parts.append(f"budget {budget:.2f}")
    length = _number(detail.get("max_model_len"))
    if length is not None:
        parts.append(f"max-model-len {length:,.0f}")
    dtype = detail.get("kv_cache_dtype")
    if isinstance(dtype, str):
        parts.append(f"KV dtype {dtype}")
    result = detail.get("result")
    if isinstance(result, str):
        parts.append(_RELAUNCH_RESULTS.get(result, result))
    return " · ".join(parts) or "—"


def describe(event: Event) -> str:
    """An event in words. A recording is anyone's file: a field of the wrong type is shown as
    it is, never a reason for the console to fail."""
    detail, kind = event.detail, event.name
    if kind == "finding":
        lasted = _number(detail.get("duration_s"))
        if detail.get("change") == "closed" and lasted is not None:
            return f"{detail.get('kind', '')} closed after {duration(lasted)}"
        text = f"{detail.get('kind', '')}: {detail.get('summary', '')}"
        return text + (f" (lasted {duration(lasted)})" if lasted is not None else "")
    if kind == "relaunch":
        return _relaunch_words(detail)
    if kind == "exit":
        code = detail.get("returncode")
        # None: the process was not this vramtop's own child, so its exit code never reached it.
        return "the server ended (exit code not known)" if code is None else f"exit code {code}"
    ready = _number(detail.get("ready_s"))
    if kind == "ready" and ready is not None:
        return f"ready in {ready_time(ready)}"
    if kind in ("start", "stop", "restart") and detail.get("reason") in ("asked", "quit"):
        return "asked from vramtop" if detail.get("reason") == "asked" else "on quit"
    if kind == "stop" and detail.get("reason") == "observed":
        return "the server is shutting down"
    if kind == "start" and not detail:
        return "the server is starting"  # (seen: its state turned to starting)
    return ", ".join(f"{k} {v}" for k, v in detail.items()) or "—"
