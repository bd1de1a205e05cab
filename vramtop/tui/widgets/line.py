"""A one-line text that redraws only when its text changes, without a layout pass.

Most of the console's lines are the same from one tick to the next (pool size, budget,
concurrency); redrawing them, and re-laying out the screen each second, is most of the CPU a
naive console spends.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static


class Line(Static):
    DEFAULT_CSS = """
    Line { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    _shown: Content | None = None

    def show(self, content: Content | str) -> None:
        new = content if isinstance(content, Content) else Content(content)
        if self._shown is not None and self._shown.is_same(new):
            return
        self._shown = new
        # The height is fixed (one line), so the screen's layout cannot change.
        self.update(new, layout=False)
