"""Shared by the console benches: the apps measured and the floor they are compared with."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.app import App, ComposeResult
from textual.widgets import Log, Sparkline

from vramtop.core.model import Sample

if TYPE_CHECKING:
    from vramtop.tui.app import VramtopApp


class FloorApp(App[None]):
    """The least a live Textual console does: one Sparkline updated once a second."""

    def __init__(self, interval_s: float = 1.0) -> None:
        super().__init__()
        self._interval = interval_s
        self._data: list[float] = []

    def compose(self) -> ComposeResult:
        yield Sparkline([])

    def on_mount(self) -> None:
        self.set_interval(self._interval, self.update_data)

    def update_data(self) -> None:
        self._data = [*self._data[-119:], 50 + 25 * math.sin(len(self._data) / 5)]
        self.query_one(Sparkline).data = self._data


# What vLLM writes for each request it serves (the access log), the bulk of a busy log.
REQUEST_LINE = (
    '(APIServer pid=4242) INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
)
# Lines as long, each saying something else (the log folds lines that differ only in their
# numbers): the worst case, where every line is a row of its own.
DISTINCT_LINE = "(APIServer pid=4242) INFO:     adapter {word} loaded, serving {word} requests"
_LETTERS = "ghijklmnop"  # a number spelt in letters that are no hex digits


def log_line(kind: str, n: int) -> str:
    """The `n`th line of a log of `kind`: "access" (request lines) or "distinct"."""
    if kind == "access":
        return REQUEST_LINE.format(port=40000 + n % 20000)
    word = "".join(_LETTERS[int(d)] for d in str(n))
    return DISTINCT_LINE.format(word=word.rjust(12, "z"))


class FloorLogApp(FloorApp):
    """The floor, and Textual's own `Log` widget, in a panel as tall as the console's server
    log at 120x40, written `log_rate` lines of `log_kind` (log_line) a second: what showing
    each line of a log costs in Textual itself, whoever draws it. Its Log folds nothing, so
    each line is a row, as vramtop's lines that never fold are."""

    DEFAULT_CSS = "Log { height: 23; border: round $primary; }"

    def __init__(self, log_rate: float, log_kind: str, interval_s: float = 1.0) -> None:
        super().__init__(interval_s)
        self._rate, self._kind = log_rate, log_kind
        self._due = 0.0  # lines written so far, with the fraction owed
        self._written = 0

    def compose(self) -> ComposeResult:
        yield from super().compose()
        yield Log(max_lines=500)

    def update_data(self) -> None:
        super().update_data()
        self._due += self._rate * self._interval
        lines = [log_line(self._kind, n) for n in range(self._written, int(self._due))]
        self._written += len(lines)
        self.query_one(Log).write_lines(lines)


def console_app(
    interval_s: float = 1.0,
    on_first_sample: Callable[[], object] | None = None,
    log_rate: float = 0.0,
    log_kind: str = "access",
) -> VramtopApp:
    """vramtop's console on the deterministic fake backend (no simulator processes to count).

    With `log_rate`, the server writes that many lines a second of `log_kind` (log_line) to
    its log."""
    from tests.support.fake_backend import FakeBackend as _FakeBackend

    class FakeBackend(_FakeBackend):
        written = 0.0

        def next_sample(self) -> Sample:
            self.written += log_rate * interval_s
            while len(self._log) < int(self.written) + 20:
                self._log.append(log_line(log_kind, len(self._log)))
            return super().next_sample()

    from vramtop.settings import Settings
    from vramtop.tui.app import VramtopApp
    from vramtop.tui.messages import SampleArrived

    class MarkedApp(VramtopApp):
        def on_sample_arrived(self, message: SampleArrived) -> None:
            # Textual also calls VramtopApp's handler (it dispatches along the MRO): calling
            # super() here would render every sample twice and double the measured cost.
            if on_first_sample is not None:
                self.call_after_refresh(on_first_sample)

    backend = FakeBackend()
    return MarkedApp(backend, Settings(interval_s=interval_s), clock=backend.clock)


def demo_console_app(
    interval_s: float = 1.0, part: str | None = None
) -> tuple[VramtopApp, Callable[[], bool], Callable[[], None]]:
    """vramtop's console on the demo, as `vramtop --demo` runs it; (app, serving?, close).

    `part` leaves something out once the server serves, to see what the rest costs:
    "reads" draws nothing (the reads, and the samples' messages, only); "still-log" keeps
    the server log as it was (everything but the log's new lines)."""
    from vramtop.core.model import ServerState
    from vramtop.machines.demo_backend import demo_backend
    from vramtop.settings import Settings
    from vramtop.tui.app import VramtopApp

    class ReadsOnly(VramtopApp):
        def _render(self, sample: Sample, log_lines: list[str], *, log_kept: bool = False) -> None:
            if self.state is not ServerState.RUNNING:
                super()._render(sample, log_lines, log_kept=log_kept)

    class StillLog(VramtopApp):
        kept: list[str] | None = None

        def _render(self, sample: Sample, log_lines: list[str], *, log_kept: bool = False) -> None:
            if self.state is ServerState.RUNNING:
                self.kept = log_lines if self.kept is None else self.kept
                log_lines = self.kept
            super()._render(sample, log_lines, log_kept=log_kept)

    app_class = {None: VramtopApp, "reads": ReadsOnly, "still-log": StillLog}[part]
    backend, _owned = demo_backend()
    app = app_class(backend, Settings(interval_s=interval_s))

    def serving() -> bool:
        return app.state is ServerState.RUNNING

    return app, serving, lambda: backend.close(True)
