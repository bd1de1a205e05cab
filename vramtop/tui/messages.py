"""Messages that carry results from worker threads back to the event loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

from vramtop.machines.interface import Frame
from vramtop.outcomes import ActionResult

if TYPE_CHECKING:
    from vramtop.core.findings import Finding


class SampleArrived(Message):
    """One tick's frame, and where the normal rate came from in words."""

    def __init__(
        self,
        frame: Frame,
        *,
        normal_origin: str | None = None,
        answers: int = 0,
        log_kept: bool = False,
        opened: tuple[Finding, ...] = (),
        closed: tuple[Finding, ...] = (),
    ) -> None:
        super().__init__()
        self.frame = frame
        # The findings that opened and closed since the previous frame (the runner's rule).
        self.opened = opened
        self.closed = closed
        self.normal_origin = normal_origin
        self.answers = answers  # the console's asks for a read, up to this one, are answered
        self.log_kept = log_kept  # the frame's log lines are every one the backend keeps


class TickFailed(Message):
    """The backend raised (it should not): say so, keep the console alive."""

    def __init__(self, reason: str, *, answers: int = 0) -> None:
        super().__init__()
        self.answers = answers
        self.reason = reason


class ActionProgress(Message):
    """A phase of a long action: "stopping", "memory released", "loading", … "ready"."""

    def __init__(self, action: str, phase: str, expected_s: float | None = None) -> None:
        super().__init__()
        self.action = action
        self.phase = phase
        # The last step's total (the first message of a start, restart or relaunch only).
        self.expected_s = expected_s


class ActionFinished(Message):
    def __init__(self, action: str, result: ActionResult) -> None:
        super().__init__()
        self.action = action
        self.result = result
