"""The console's footer: Textual's compact footer, built once per change of what it shows."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class ConsoleFooter(Footer):
    """Textual's `Footer(compact=True)`, with the same keys, built with less work.

    Textual's footer builds its keys anew each time the bindings may have changed (a focus
    moved, a screen opened, the console asked), once per ask even where several come in one
    frame and nothing it shows changed: four times as the console opened. Each key, once
    mounted, then took its compact look as a second styling of its own. Here a change is
    built once after the frame it came in, only where the keys shown differ, and the keys
    come with their compact look.
    """

    def __init__(self) -> None:
        super().__init__(compact=True)
        self._build_asked = False
        self._built: tuple[Any, ...] | None = None

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                widget.add_class("-compact", update=False)
            yield widget

    def bindings_changed(self, screen: Screen[Any]) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen and not self._build_asked:
            self._build_asked = True
            self.call_after_refresh(self._build)

    async def _build(self) -> None:
        self._build_asked = False
        shown = self._shown()
        if shown != self._built:
            self._built = shown
            await self.recompose()

    def _shown(self) -> tuple[Any, ...]:
        """What `compose` builds the keys from."""
        app = self.app
        return (
            self.show_command_palette,
            app.ENABLE_COMMAND_PALETTE,
            *(
                (key, binding, enabled, tooltip, app.get_key_display(binding))
                for key, (_node, binding, enabled, tooltip) in self.screen.active_bindings.items()
            ),
        )
