"""Every key, as currently mapped, and what it does."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close"),
    ]

    def __init__(self, rows: list[tuple[str, str, str]]) -> None:
        """rows: (key as shown, what it does, binding id for remapping)."""
        super().__init__()
        self._rows = rows

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help", classes="dialog"):
            parts: list[str | tuple[str, str]] = []
            for key, description, binding_id in self._rows:
                parts += [(f"{key:>7}", "bold $accent"), f"  {description}"]
                parts += [(f"  [{binding_id}]\n", "$text-muted")]
            parts.append(
                (
                    '\nRemap a key in config.toml: [keys] relaunch = "ctrl+b".\n'
                    "Ctrl+P opens the command palette. Esc closes this help.",
                    "$text-muted",
                )
            )
            yield Static(Content.assemble(*parts))

    def on_mount(self) -> None:
        self.query_one("#help").border_title = "Keys"

    def action_close(self) -> None:
        self.dismiss(None)
