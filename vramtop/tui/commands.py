"""The command palette: one entry for every console action (the same ones the keys run)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider


class PaletteHost(Protocol):
    """What the palette asks of the console (the App), which imports this module."""

    @property
    def theme_names(self) -> tuple[str, ...]: ...
    def palette_entries(self) -> Iterable[tuple[str, str, str]]: ...
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None: ...


class ConsoleCommands(Provider):
    def _entries(self) -> list[tuple[str, str, str]]:
        app = cast("PaletteHost", self.app)
        return [
            (title, help_text, action)
            for title, help_text, action in app.palette_entries()
            if app.check_action(action, ()) is True
        ]

    async def discover(self) -> Hits:
        app = self.app
        for title, help_text, action in self._entries():
            yield DiscoveryHit(title, partial(app.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        app = self.app
        for title, help_text, action in self._entries():
            score = matcher.match(title)
            if score > 0:
                yield Hit(
                    score, matcher.highlight(title), partial(app.run_action, action), help=help_text
                )


class ConsoleThemes(Provider):
    """The palette's theme list: vramtop's themes (bundled and the user's own), the same
    ones `t` cycles through. Textual's built-in themes lack vramtop's colour variables."""

    def _names(self) -> list[str]:
        return list(cast("PaletteHost", self.app).theme_names)

    def _choose(self, name: str) -> None:
        self.app.theme = name

    async def discover(self) -> Hits:
        for name in self._names():
            yield DiscoveryHit(name, partial(self._choose, name))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name in self._names():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), partial(self._choose, name))
