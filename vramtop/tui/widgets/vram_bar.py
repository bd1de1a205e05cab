"""One fixed-scale bar of the whole card: vLLM's share | desktop / other | free, budget marked."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from vramtop.core.model import Split


class VramBar(Widget):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "vram-bar--server",
        "vram-bar--desktop",
        "vram-bar--free",
        "vram-bar--budget",
    }
    DEFAULT_CSS = """
    VramBar { height: 1; }
    VramBar > .vram-bar--server { color: $vram-server; }
    VramBar > .vram-bar--desktop { color: $vram-desktop; }
    VramBar > .vram-bar--free { color: $vram-free; }
    VramBar > .vram-bar--budget { color: $vram-budget; text-style: bold; }
    """

    # The bar as cells: (vLLM cells, desktop cells, budget mark or None) at the current width.
    # Bytes jitter every tick; the cells rarely do, so the bar repaints only when they change.
    layout: reactive[tuple[int, int, int | None] | None] = reactive(None)

    def __init__(self) -> None:
        super().__init__()
        self._split: Split | None = None

    @property
    def split(self) -> Split | None:
        return self._split

    @split.setter
    def split(self, split: Split | None) -> None:
        self._split = split
        self.layout = _layout(split, self.size.width)

    def on_resize(self) -> None:
        self.layout = _layout(self._split, self.size.width)

    def render(self) -> Text:
        width = self.size.width
        layout = _layout(self._split, width)
        if layout is None:
            return Text("·" * max(0, width))
        server, desktop, mark = layout
        free = width - server - desktop
        # Different glyphs as well as colours: the bar must read under NO_COLOR too.
        cells = ["█"] * server + ["▓"] * desktop + ["░"] * free
        styles = (
            ["vram-bar--server"] * server
            + ["vram-bar--desktop"] * desktop
            + ["vram-bar--free"] * free
        )
        if mark is not None:
            cells[mark] = "▌"
            styles[mark] = "vram-bar--budget"
        rich_styles = {name: self.get_component_rich_style(name) for name in set(styles)}
        text = Text()
        run_start = 0
        # One span per run of equal cells, not one per cell.
        for index in range(1, width + 1):
            if index == width or styles[index] != styles[run_start]:
                text.append("".join(cells[run_start:index]), rich_styles[styles[run_start]])
                run_start = index
        return text


def _layout(split: Split | None, width: int) -> tuple[int, int, int | None] | None:
    if split is None or split.total_bytes <= 0 or width <= 0:
        return None
    scale = width / split.total_bytes
    server = min(round((split.server_bytes or 0) * scale), width)
    desktop = min(round((split.desktop_bytes or 0) * scale), width - server)
    mark = None
    if split.budget_bytes:
        mark = min(width - 1, max(0, round(split.budget_bytes * scale) - 1))
    return server, desktop, mark
