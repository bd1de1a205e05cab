"""One fixed-scale bar of the whole card: vLLM's share | desktop / other | free, budget marked."""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content

from vramtop.core.model import Split

SERVER_STYLE = "$vram-server"
DESKTOP_STYLE = "$vram-desktop"
FREE_STYLE = "$vram-free"
BUDGET_STYLE = "bold $vram-budget"


@dataclass(frozen=True)
class VramBar:
    """A row of a panel (see text_panel.py): the bar at whatever width the panel has."""

    split: Split | None

    def draw(self, width: int) -> Content:
        layout = bar_cells(self.split, width)
        if layout is None:
            return Content("·" * max(0, width))
        server, desktop, mark = layout
        free = width - server - desktop
        # Different glyphs as well as colours: the bar must read under NO_COLOR too.
        cells = [("█", SERVER_STYLE)] * server + [("▓", DESKTOP_STYLE)] * desktop
        cells += [("░", FREE_STYLE)] * free
        if mark is not None:
            cells[mark] = ("▌", BUDGET_STYLE)
        # One span per run of equal cells, not one per cell.
        runs: list[tuple[str, str]] = []
        for glyph, style in cells:
            if runs and runs[-1][1] == style:
                runs[-1] = (runs[-1][0] + glyph, style)
            else:
                runs.append((glyph, style))
        return Content.assemble(*runs)


def bar_cells(split: Split | None, width: int) -> tuple[int, int, int | None] | None:
    """(vLLM cells, desktop cells, budget mark or None) at `width`; None without a split."""
    if split is None or split.total_bytes <= 0 or width <= 0:
        return None
    scale = width / split.total_bytes
    server = min(round((split.server_bytes or 0) * scale), width)
    desktop = min(round((split.desktop_bytes or 0) * scale), width - server)
    mark = None
    if split.budget_bytes:
        mark = min(width - 1, max(0, round(split.budget_bytes * scale) - 1))
    return server, desktop, mark
