"""Messages that carry results from worker threads back to the event loop."""

from __future__ import annotations

from textual.message import Message

from vramtop.core.events import Event
from vramtop.core.findings import Finding
from vramtop.core.headroom.terms import HeadroomInputs
from vramtop.core.model import Rates, Sample
from vramtop.machines.interface import ActionResult


class SampleArrived(Message):
    """One tick's worth of everything the console shows."""

    def __init__(
        self,
        sample: Sample,
        log_lines: list[str],
        findings: list[Finding],
        events: list[Event],
        *,
        headroom_inputs: HeadroomInputs | None = None,
        baseline: Rates | None = None,
        normal_origin: str | None = None,
        answers: int = 0,
        log_notice: str | None = None,
    ) -> None:
        super().__init__()
        self.answers = answers  # the console's asks for a read, up to this one, are answered
        self.log_notice = log_notice  # why the server's output cannot be shown, if it cannot
        self.sample = sample
        self.log_lines = log_lines
        self.findings = findings
        self.events = events
        self.headroom_inputs = headroom_inputs
        self.baseline = baseline
        self.normal_origin = normal_origin  # where the normal rate came from, in words


class TickFailed(Message):
    """The backend raised (it should not): say so, keep the console alive."""

    def __init__(self, reason: str, *, answers: int = 0) -> None:
        super().__init__()
        self.answers = answers
        self.reason = reason


class ActionProgress(Message):
    """A step of a long action: "stopping", "memory released", "loading", … "ready"."""

    def __init__(self, action: str, step: str) -> None:
        super().__init__()
        self.action = action
        self.step = step


class ActionFinished(Message):
    def __init__(self, action: str, result: ActionResult) -> None:
        super().__init__()
        self.action = action
        self.result = result
