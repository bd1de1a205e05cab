"""The rows of a log on screen: each drawn only while it shows, repeated lines folded."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.events import Resize
from textual.geometry import Region, Size
from textual.reactive import Reactive
from textual.scroll_view import ScrollView
from textual.selection import Selection
from textual.strip import Strip

from vramtop.core.log_rows import FoldedRows, Row

# A folded row whose line is no failure is drawn again at most this often (seconds of the
# console's clock) while only its count and newest line change: under steady traffic its
# count moves every tick, and drawing that one row costs the console as much as the rest of
# the log (Textual repaints the panel's lines for it). A new row, a failure's count, a row
# after a quiet spell, and whatever scrolls into view are drawn at once.
COUNT_REDRAW_S = 3.0
# Control characters (a stray escape sequence, a carriage return) would move the cursor.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _printable(line: str) -> str:
    if line.isprintable():  # most lines: no tab, no control character (checked in C)
        return line
    return _CONTROL.sub("\ufffd", line.expandtabs())


class _Frame(NamedTuple):
    """What the rows of one frame are drawn with."""

    style: Style
    width: int
    scroll_x: int
    scroll_y: int
    selection: Selection | None


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


_DIM = Style(dim=True)  # a count's style, over the log's own


def count_badge(count: int) -> str:
    """What follows a folded row's line: how many lines it stands for."""
    return f"  ×{count}" if count > 1 else ""


class TailLog(ScrollView, can_focus=True):
    """The server's lines as rows of text, each drawn only when it is on screen.

    A log is mostly lines nobody sees: vLLM writes a line per request under load, and a
    panel shows twenty of them. RichLog renders every line it is given (styles, segments,
    strips) the moment it is written, so its cost grew with the server's rate of lines.
    Here a line is kept as its text; it is styled and drawn when it scrolls into view, and
    its strip is kept while it stays there, so a second of output costs at most a panel's
    height of new strips however many lines it had.

    Lines that repeat the shape of a recent row fold into it (`vramtop.core.log_rows`): a
    busy server's request lines then change one row in place, and only that row is drawn
    again, instead of every row on screen moving up by as many lines as came.

    The log's size never depends on its content (it fills what the panels leave), so its
    growth repaints it without laying out the whole screen: `virtual_size` does not ask for a
    layout. While it follows the tail it has no scrollbar (`-following`, see ServerLog's
    CSS), as `tail -f` has none; the scrollbar appears once the reader scrolls.
    """

    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def __init__(
        self, styler: Callable[[Row], Text | None], *, max_lines: int, classes: str
    ) -> None:
        super().__init__(classes=classes)
        self._styler = styler
        self._max_lines = max_lines
        self._rows = FoldedRows()
        self._dropped = 0  # rows dropped from the front: a row's place in the log moved
        self._width = 0
        self._strips: LRUCache[tuple[int, int, int, Style, int, int], Strip] = LRUCache(256)
        self._frame: _Frame | None = None
        self._counts_due: set[int] = set()  # rows whose count changed, not yet drawn again
        self._counts_drawn_at: float | None = None

    @property
    def texts(self) -> list[str]:
        """The rows' lines, the newest of each folded row (the filtered view while a search
        is on)."""
        return [row.line for row in self._rows.rows]

    @property
    def rows(self) -> list[tuple[str, int]]:
        """Each row's line and how many lines it stands for."""
        return [(row.line, row.count) for row in self._rows.rows]

    @property
    def following(self) -> bool:
        """At the tail: new lines, and a change of size, keep it there."""
        return self.has_class("-following")

    @following.setter
    def following(self, value: bool) -> None:
        self.set_class(value, "-following")
        if not value and self.show_vertical_scrollbar:
            self.vertical_scrollbar.position = self.scroll_y  # not moved while it was hidden

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        # ScrollView's own moves the scrollbar and repaints the region it looks up. While the
        # log follows its tail its scrollbar is hidden (no width), yet moving it marks it for
        # a repaint, and a repaint of a widget that is not on screen makes the compositor
        # build its map of the whole screen again: once a second under a busy log, a fifth
        # of what the log cost (bench_console.py --only floor,ui,ui-log).
        if not self.following and self.show_vertical_scrollbar:
            self.vertical_scrollbar.position = new_value
        if round(old_value) != round(new_value):
            self.refresh()

    def write_lines(self, lines: list[str], now: float | None = None) -> bool:
        """Add lines; whether they added rows (else they only changed rows in place).

        `now` (the console's clock) holds back a folded row's new count until
        COUNT_REDRAW_S have passed since counts were last drawn; without it, every change
        is drawn at once."""
        if not lines:  # (none that a search lets through): a count held back may be due
            self.draw_counts_due(now)
            return False
        rows = self._rows
        before = len(rows.rows)
        touched = {rows.add(line) for line in map(_printable, lines)}
        for index in touched:  # once a row, however many lines folded into it
            row = rows.rows[index]
            self._width = max(self._width, cell_len(row.line) + len(count_badge(row.count)))
        grown = len(rows.rows) > before
        excess = len(rows.rows) - self._max_lines
        if excess > 0:
            # A fifth more than asked: a row's index (its place in the selection's text, in
            # its drawn strip's offsets) then stays the same for the next many rows, rather
            # than moving with every new row, and the strips drawn for it are kept.
            excess += self._max_lines // 5
            rows.drop_oldest(excess)
            self._dropped += excess
        self.virtual_size = Size(self._width, len(rows.rows))
        if grown:
            self._counts_due.clear()  # every row on screen is drawn again
            self.refresh()  # new rows: what shows moves up
            return True
        # Only rows in place changed (their line, their count): draw those rows again, not
        # every row on screen. Textual repaints the lines of a region refreshed, no others.
        for index in touched:
            if now is None or rows.rows[index].failure:
                self._refresh_row(index)
            else:
                self._counts_due.add(index)
        self.draw_counts_due(now)
        return False

    def draw_counts_due(self, now: float | None) -> None:
        """Draw the rows whose count changed, unless counts were drawn less than
        COUNT_REDRAW_S ago (a clock that went back draws them)."""
        due = self._counts_due
        drawn_at = self._counts_drawn_at
        if not due:
            return
        if now is not None and drawn_at is not None and 0 <= now - drawn_at < COUNT_REDRAW_S:
            return
        self._counts_drawn_at = now
        for index in due:
            self._refresh_row(index)
        due.clear()

    def _refresh_row(self, index: int) -> None:
        """Repaint row `index` if it is on screen."""
        top = round(self.scroll_y)
        if top <= index < top + self.size.height:
            self.refresh_line(index)

    def clear(self) -> None:
        self._rows.clear()
        self._strips.clear()
        self._counts_due.clear()
        self._dropped = self._width = 0
        self.virtual_size = Size(0, 0)
        self.refresh()

    def watch_virtual_size(self, size: Size) -> None:
        self._scroll_update(size)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()  # a new theme: every line's colours change

    def release_anchor(self) -> None:
        # Textual calls this for every scroll the reader makes (keys, wheel, scrollbar).
        self.following = False
        super().release_anchor()

    def follow_tail(self) -> None:
        """Scroll to the last line now, in this frame, rather than after the next one (the
        log would be drawn twice, before and after scrolling)."""
        self.following = True
        self.scroll_end(animate=False, immediate=True, x_axis=False)

    def on_resize(self, event: Resize) -> None:
        # A banner opening above shrinks the log: the tail must stay in view.
        if self.following:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    # What every row of a frame shares (the widget's style, its width, the scroll offset, the
    # selection) cannot change within the frame: it is worked out once per frame rather than
    # once per row. The style is Textual's `visual_style`, kept until a style changes
    # (`rich_style` walks every ancestor's CSS each time it is read).
    def render_lines(self, crop: Region) -> list[Strip]:
        self._frame = self._frame_now()
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def _frame_now(self) -> _Frame:
        scroll_x, scroll_y = self.scroll_offset
        return _Frame(
            self.visual_style.rich_style,
            self.scrollable_content_region.width,
            scroll_x,
            scroll_y,
            self.text_selection,
        )

    def render_line(self, y: int) -> Strip:
        frame = self._frame or self._frame_now()
        index = frame.scroll_y + y
        rows = self._rows.rows
        if index >= len(rows):
            return Strip.blank(frame.width, frame.style)
        row = rows[index]
        if frame.selection is not None:
            return self._draw(row, index, frame, frame.selection.get_span(index))
        # A row is drawn once for as long as it shows the same line and count at the same
        # place in the log: rows that only move up the screen are not drawn again.
        key = (self._dropped, index, row.count, frame.style, frame.width, frame.scroll_x)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._draw(row, index, frame)
            self._strips.set(key, strip)
        return strip

    def _draw(
        self, row: Row, index: int, frame: _Frame, selected: tuple[int, int] | None = None
    ) -> Strip:
        """The row as it shows: its text in the widget's style, cut to the panel's width, and
        each cell's place in the log (for selecting text with the mouse)."""
        style, width, scroll_x = frame.style, frame.width, frame.scroll_x
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
                return self._fitted(segments, length, index, frame)
        text = self.text(row) if styled is None else styled
        if selected is not None:
            start, end = selected
            selection_style = self.screen.get_component_rich_style("screen--selection")
            text.stylize(selection_style, start, len(text.plain) if end == -1 else end)
        length = text.cell_len
        segments = list(Segment.apply_style(text.render(self.app.console), style))
        if scroll_x == 0 and length <= width:
            return self._fitted(segments, length, index, frame)
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

    @staticmethod
    def _fitted(segments: list[Segment], length: int, index: int, frame: _Frame) -> Strip:
        """A row that fits: its segments, the padding, and each one's place made in one go,
        rather than a strip made for each step (a strip costs a few microseconds, and a busy
        log brings a panel's height of new rows a second)."""
        if length < frame.width:
            segments.append(Segment(" " * (frame.width - length), frame.style))
        return Strip(_placed(segments, index), frame.width)

    @staticmethod
    def text(row: Row) -> Text:
        """A row with nothing of its own to style, as text: its line, and its count dim."""
        text = Text(row.line, no_wrap=True)
        text.append(count_badge(row.count), "dim")
        return text

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        # What is copied is what shows: a folded row's newest line and its count.
        shown = "\n".join(row.line + count_badge(row.count) for row in self._rows.rows)
        return selection.extract(shown), "\n"

    def selection_updated(self, selection: Selection | None) -> None:
        self.refresh()
