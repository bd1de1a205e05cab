"""A sparkline on a fixed scale (0 … ceiling).

Textual's `Sparkline` stretches its data's own min–max over the full height, so 76 ↔ 78 tok/s
noise looks like a collapse. Here zero is always the bottom, so a real collapse looks like one.
"""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

BLOCKS = " ▁▂▃▄▅▆▇█"


class FixedSparkline(Widget):
    DEFAULT_CSS = """
    FixedSparkline { height: 1; color: $primary; }
    """

    # Assign new tuples: in-place mutation would not be seen by the reactive.
    data: reactive[tuple[float, ...]] = reactive(tuple)
    ceiling: reactive[float] = reactive(1.0)

    def render(self) -> Text:
        width = self.size.width
        values = self.data[-width:] if width else ()
        ceiling = self.ceiling if self.ceiling > 0 else 1.0
        top = len(BLOCKS) - 1
        chars = []
        for value in values:
            level = round(max(0.0, min(1.0, value / ceiling)) * top)
            # Keep a non-zero value visible: a trickle of tokens is not silence.
            chars.append(BLOCKS[max(level, 1) if value > 0 else 0])
        return Text("".join(chars).rjust(width))
