"""The rows of a log on screen: each drawn only while it shows, repeated lines folded."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.dom import NoScreen
from textual.events import Resize
from textual.geometry import Region, Size
from textual.reactive import Reactive
from textual.scroll_view import ScrollView
from textual.selection import Selection
from textual.strip import Strip

from vramtop.core.log_rows import Row
from vramtop.tui.widgets.kept_rows import KeptRows
from vramtop.tui.widgets.row_strips import RowStrips, Viewport


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

    Which rows there are, and which are due to be drawn again, is `kept` (kept_rows.py); how
    a row is drawn, and which drawn rows are kept, is `strips` (row_strips.py). This widget
    says which row shows where and scrolls.

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
        self.kept = KeptRows(max_lines)
        self.strips = RowStrips(styler)
        self._viewport: Viewport | None = None

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
        """Add lines; whether they added rows (else they only changed rows in place). No
        lines: a count held back may be due.

        `now` (the console's clock) holds back a folded row's new count until
        COUNT_REDRAW_S (kept_rows.py) have passed since counts were last drawn; without it,
        every change is drawn at once."""
        kept = self.kept
        grown = kept.add(lines, now)
        self.virtual_size = Size(kept.width, len(kept))
        if grown:
            self.refresh()  # new rows: what shows moves up
            return True
        # Only rows in place changed (their line, their count): draw those rows again, not
        # every row on screen. Textual repaints the lines of a region refreshed, no others.
        top = round(self.scroll_y)
        for index in kept.due(now):
            if top <= index < top + self.size.height:  # on screen
                self.refresh_line(index)
        return False

    def clear(self) -> None:
        self.kept.clear()
        self.strips.forget()
        self.virtual_size = Size(0, 0)
        self.refresh()

    def watch_virtual_size(self, size: Size) -> None:
        self._scroll_update(size)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.strips.forget()  # a new theme: every line's colours change

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
        self._viewport = _viewport_of(self)
        try:
            return super().render_lines(crop)
        finally:
            self._viewport = None

    def render_line(self, y: int) -> Strip:
        view = self._viewport or _viewport_of(self)
        index = view.scroll_y + y
        rows = self.kept.folded
        if index >= len(rows):
            return Strip.blank(view.width, view.style)
        return self.strips.strip(rows[index], index, view, self.kept.dropped)

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        # What is copied is what shows: a folded row's newest line and its count.
        return selection.extract(self.kept.shown_text()), "\n"


def _viewport_of(log: TailLog) -> Viewport:
    """What the rows of the log's frame are drawn with, now."""
    scroll_x, scroll_y = log.scroll_offset
    try:
        selection = log.text_selection
        selected = (
            None if selection is None else log.screen.get_component_rich_style("screen--selection")
        )
    except NoScreen:  # drawn once more as it is taken off its screen (the console closing)
        selection, selected = None, None
    return Viewport(
        log.visual_style.rich_style,
        log.scrollable_content_region.width,
        scroll_x,
        scroll_y,
        selection,
        selected,
        log.app.console,
    )
