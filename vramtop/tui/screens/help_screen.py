"""Every key, as currently mapped, and what it does."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen .help-row { height: auto; }
    HelpScreen .help-key { width: 7; padding-right: 2; text-align: right;
        color: $accent; text-style: bold; }
    HelpScreen .help-text { width: 1fr; }
    HelpScreen .help-id { width: 12; padding-left: 1; color: $text-muted; }
    HelpScreen .help-note { color: $text-muted; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close"),
    ]

    def __init__(self, rows: list[tuple[str, str, str]]) -> None:
        """rows: (key as shown, what it does, binding id for remapping)."""
        super().__init__()
        self._rows = rows

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help", classes="dialog"):
            # Three columns, so a long description wraps inside its own column and the
            # binding id (what config.toml's [keys] names) never lands on a line of its own.
            for key, description, binding_id in self._rows:
                with Horizontal(classes="help-row"):
                    yield Static(Content(key), classes="help-key")
                    yield Static(Content(description), classes="help-text")
                    yield Static(Content(binding_id), classes="help-id")
            yield Static(
                Content(
                    "\nRemap a key by its name on the right, in config.toml:"
                    '\n    [keys] relaunch = "ctrl+b"'
                    "\nCtrl+P opens the command palette. Esc closes this help."
                ),
                classes="help-note",
            )

    def on_mount(self) -> None:
        self.query_one("#help").border_title = "Keys"

    def action_close(self) -> None:
        self.dismiss(None)
