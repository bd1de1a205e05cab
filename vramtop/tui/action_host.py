"""What the console's action runner (runner.py) asks of the App that builds it, in two parts:
`ActionHost`, the console (its state, its status line, its keys, its next read), and
`AppCalls`, Textual's App (workers, timers, screens, toasts, messages, exit). Protocols, so
that the runner never imports the App (which imports the runner); and two, so that what an
action decides can be tried against a console of plain values with calls that run at once
(tests/tui/test_action_runner.py), without a Textual app running."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from textual.message import Message
    from textual.notifications import SeverityLevel
    from textual.screen import Screen

    from vramtop.machines.interface import Backend
    from vramtop.settings import Settings
    from vramtop.tui.console_state import ConsoleState
    from vramtop.tui.way_back import WayBackOffer

Chosen = TypeVar("Chosen")


class ActionHost(Protocol):
    """What the runner asks of the console: what it shows, what it says, its keys."""

    @property
    def backend(self) -> Backend: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def shown(self) -> ConsoleState: ...
    @property
    def way_back_offer(self) -> WayBackOffer | None: ...

    def now(self) -> float: ...
    def say(self, text: str | None, *, news: bool = True, after: bool = False) -> None: ...
    def render_header(self) -> None: ...
    def key_of(self, binding_id: str) -> str: ...
    def request_tick(self) -> int:
        """Ask for a read; returns the ask's number (`SampleArrived.answers`)."""
        ...


class AppCalls(Protocol):
    """What the runner asks of Textual's App: where its work runs and how it comes back."""

    @property
    def screen(self) -> object: ...

    def push_screen(
        self, screen: Screen[Chosen], callback: Callable[[Chosen | None], None]
    ) -> object: ...
    def run_worker(
        self,
        work: Callable[[], object],
        name: str | None,
        group: str,
        *,
        exclusive: bool,
        thread: bool,
        exit_on_error: bool,
    ) -> object: ...
    def call_from_thread(self, callback: Callable[..., object], *args: object) -> object: ...
    def set_timer(self, delay: float, callback: Callable[[], object]) -> object: ...
    def notify(
        self, message: str, *, title: str, severity: SeverityLevel, timeout: float | None
    ) -> None: ...
    def refresh_bindings(self) -> None: ...
    def post_message(self, message: Message) -> bool: ...
    def exit(self, result: int | None) -> None: ...
