"""How a log's row becomes the strip Textual paints: its text in the view's style, cut to the
panel's width, each cell marked with its place in the log; and the strips kept while their row
shows unchanged. The view (TailLog) says which row goes where; this draws it."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.selection import Selection
from textual.strip import Strip

from vramtop.core.log_rows import Row
from vramtop.tui.widgets.kept_rows import count_badge

_DIM = Style(dim=True)  # a count's style, over the log's own


class Viewport(NamedTuple):
    """What the rows of one frame are drawn with: the same for every row of it (the log's
    style and width, where it is scrolled to, the text selected)."""

    style: Style
    width: int
    scroll_x: int
    scroll_y: int
    selection: Selection | None
    selection_style: Style | None  # how selected text shows (while there is a selection)
    console: Console


def plain_text(row: Row) -> Text:
    """A row with nothing of its own to style, as text: its line, and its count dim."""
    text = Text(row.line, no_wrap=True)
    text.append(count_badge(row.count), "dim")
    return text


def _placed(segments: list[Segment], y: int) -> list[Segment]:
    """The segments of row `y`, each marked with where it starts, as Textual's
    `Strip.apply_offsets` marks them (text selection finds what the mouse is over by it)."""
    placed = []
    x = 0
    for text, style, _ in segments:
        offset = Style.from_meta({"offset": (x, y)})
        placed.append(Segment(text, style + offset if style else offset))
        x += len(text)
    return placed


def _fitted(segments: list[Segment], length: int, index: int, view: Viewport) -> Strip:
    """A row that fits: its segments, the padding, and each one's place made in one go,
    rather than a strip made for each step (a strip costs a few microseconds, and a busy
    log brings a panel's height of new rows a second)."""
    if length < view.width:
        segments.append(Segment(" " * (view.width - length), view.style))
    return Strip(_placed(segments, index), view.width)


class RowStrips:
    """Draws rows as strips; `styler` gives a row's own styled text (None: nothing of its own
    to style, its line shows as it is and its count dim)."""

    def __init__(self, styler: Callable[[Row], Text | None]) -> None:
        self._styler = styler
        self._strips: LRUCache[tuple[int, int, int, Style, int, int], Strip] = LRUCache(256)

    def strip(self, row: Row, index: int, view: Viewport, dropped: int) -> Strip:
        """Row `index` of the log (`dropped` rows have gone from its front) in `view`."""
        if view.selection is not None:
            return self.draw(row, index, view, view.selection.get_span(index))
        # A row is drawn once for as long as it shows the same line and count at the same
        # place in the log: rows that only move up the screen are not drawn again.
        key = (dropped, index, row.count, view.style, view.width, view.scroll_x)
        strip = self._strips.get(key)
        if strip is None:
            strip = self.draw(row, index, view)
            self._strips.set(key, strip)
        return strip

    def forget(self) -> None:
        """Drop every strip kept (a new theme: every line's colours change)."""
        self._strips.clear()

    def draw(
        self, row: Row, index: int, view: Viewport, selected: tuple[int, int] | None = None
    ) -> Strip:
        """The row as it shows: its text in the widget's style, cut to the panel's width, and
        each cell's place in the log (for selecting text with the mouse)."""
        style, width, scroll_x = view.style, view.width, view.scroll_x
        styled = self._styler(row)
        if styled is None and selected is None and scroll_x == 0:
            # Most rows: a line with nothing of its own to style. Its segments are made
            # straight from the line and its count, without a rich Text to render.
            badge = count_badge(row.count)
            length = cell_len(row.line) + len(badge)
            if length <= width:
                segments = [Segment(row.line, style)]
                if badge:
                    segments.append(Segment(badge, style + _DIM))
                return _fitted(segments, length, index, view)
        text = plain_text(row) if styled is None else styled
        if selected is not None and view.selection_style is not None:
            start, end = selected
            text.stylize(view.selection_style, start, len(text.plain) if end == -1 else end)
        length = text.cell_len
        segments = list(Segment.apply_style(text.render(view.console), style))
        if scroll_x == 0 and length <= width:
            return _fitted(segments, length, index, view)
        strip = Strip(segments, length)
        badge_width = len(count_badge(row.count))
        if badge_width and length > scroll_x + width > badge_width:
            # A folded row wider than the panel: its count stays in view, at the right edge.
            line_end = length - badge_width
            return Strip.join(
                [
                    strip.crop(scroll_x, scroll_x + width - badge_width).apply_offsets(
                        scroll_x, index
                    ),
                    strip.crop(line_end).apply_offsets(line_end, index),
                ]
            )
        return strip.crop_extend(scroll_x, scroll_x + width, style).apply_offsets(scroll_x, index)
