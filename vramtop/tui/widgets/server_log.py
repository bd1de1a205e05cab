"""The tail of vLLM's output: searchable, startup failures highlighted."""

from __future__ import annotations

import re
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.events import Resize
from textual.geometry import Region, Size
from textual.reactive import Reactive
from textual.strip import Strip
from textual.widgets import Input, RichLog

MAX_LINES = 500
# What a failed start or a dying engine prints; worth a colour even in a long tail.
FAILURE = re.compile(
    r"\b(ERROR|CRITICAL|Traceback|OutOfMemoryError|out of memory|CUDA error|EngineDeadError|"
    r"exited with code)\b",
    re.IGNORECASE,
)


class TailLog(RichLog):
    """A RichLog whose growth repaints itself instead of laying out the whole screen again.

    Every line written grows the log's virtual height, and Textual's `virtual_size` asks for
    a layout of the whole screen on each change: every panel repainted, once per line of
    server output (a third of the console's CPU while the demo logs its requests, see
    bench/bench_console.py). This log's size never depends on its content (it fills what the
    panels leave), so only its scrollbar needs to hear of it. A scrollbar appearing or going
    still lays out: `show_vertical_scrollbar` asks for that itself.

    While it follows the tail the log has no scrollbar (`-following`, see ServerLog's CSS), as
    `tail -f` has none: there it would only say "at the end", and it is drawn again, the
    height of the log, for every line that arrives (a third of what a new line costs). It
    appears as soon as the reader scrolls, showing where they are; keys and the wheel scroll
    either way.
    """

    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    _style_this_frame: Style | None = None

    @property
    def following(self) -> bool:
        """At the tail: new lines, and a change of size, keep it there."""
        return self.has_class("-following")

    @following.setter
    def following(self, value: bool) -> None:
        self.set_class(value, "-following")

    def watch_virtual_size(self, size: Size) -> None:
        self._scroll_update(size)

    def release_anchor(self) -> None:
        # Textual calls this for every scroll the reader makes (keys, wheel, scrollbar).
        self.following = False
        super().release_anchor()

    def follow_tail(self) -> None:
        """Scroll to the last line now, in this frame: RichLog's own scroll waits for the
        next frame, and the log would be drawn twice, before and after scrolling."""
        self.following = True
        self.scroll_end(animate=False, immediate=True, x_axis=False)

    def on_resize(self, event: Resize) -> None:
        # A banner opening above shrinks the log: the tail must stay in view.
        if self.following:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    # A new line scrolls the log: every visible line is drawn again, and RichLog works out
    # the widget's style (a walk over every ancestor's CSS) once per line. It cannot change
    # within one frame, so it is worked out once per frame.
    def render_lines(self, crop: Region) -> list[Strip]:
        self._style_this_frame = super().rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._style_this_frame = None

    @property
    def rich_style(self) -> Style:
        style = self._style_this_frame
        return style if style is not None else super().rich_style


class ServerLog(Vertical):
    COMPONENT_CLASSES: ClassVar[set[str]] = {"server-log--failure", "server-log--match"}
    DEFAULT_CSS = """
    ServerLog { height: 1fr; }
    ServerLog > RichLog { height: 1fr; background: transparent;
        scrollbar-size-vertical: 1; scrollbar-size-horizontal: 0;
    }
    ServerLog > RichLog.-following { scrollbar-size-vertical: 0; }
    ServerLog > Input { display: none; padding: 0 1; }
    ServerLog.-searching > Input { display: block; }
    ServerLog > .server-log--failure { color: $error; text-style: bold; }
    ServerLog > .server-log--match { background: $warning 40%; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._lines: list[str] = []
        self._query = ""
        self._subtitle = ""

    def compose(self) -> ComposeResult:
        yield TailLog(
            max_lines=MAX_LINES, wrap=False, markup=False, auto_scroll=True, classes="-following"
        )
        # Compact: one row with no border, so the typed text shows (a focused Input's tall
        # border would otherwise fill the single row and hide it).
        yield Input(
            placeholder="search the log (enter keeps it, esc clears)", id="log-search", compact=True
        )

    def on_mount(self) -> None:
        self.border_title = "Server log"
        self._redraw()  # an empty panel says so, instead of a blank box

    @property
    def lines(self) -> list[str]:
        return list(self._lines)

    def show(self, lines: list[str], notice: str | None = None) -> None:
        """Append what is new; rewrite when the tail no longer continues ours (rotated log)."""
        subtitle = notice or (f"filter: {self._query}" if self._query else "")
        if subtitle != self._subtitle:
            # Setting a border title refreshes (and re-styles) the whole log: only on change.
            self._subtitle = subtitle
            self.border_subtitle = subtitle
        if lines == self._lines:
            return
        new = _continuation(self._lines, lines)
        was_empty = not self._lines
        self._lines = list(lines[-MAX_LINES:])
        if new is None or was_empty:  # empty: replace the "no output yet" line
            self._redraw()
            return
        log = self.query_one(TailLog)
        # Follow the tail only from the tail: someone reading further up keeps their place.
        follow = log.following or log.scroll_y >= log.max_scroll_y
        for line in new:
            if self._matches(line):
                log.write(self._styled(line), scroll_end=False)
        if follow:
            log.follow_tail()

    def start_search(self) -> None:
        self.add_class("-searching")
        self.query_one(Input).focus()

    def set_query(self, query: str) -> None:
        self._query = query
        self._subtitle = f"filter: {query}" if query else ""
        self.border_subtitle = self._subtitle
        self._redraw()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.set_query(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one(RichLog).focus()

    def key_escape(self) -> None:
        search = self.query_one(Input)
        if search.value:
            search.value = ""
        self.remove_class("-searching")
        self.query_one(RichLog).focus()

    def _matches(self, line: str) -> bool:
        return not self._query or self._query.lower() in line.lower()

    def _redraw(self) -> None:
        log = self.query_one(RichLog)
        log.clear()
        if not self._lines:
            log.write(Text("No server output yet.", style="dim"))
            return
        for line in self._lines:
            if self._matches(line):
                log.write(self._styled(line))

    def _styled(self, line: str) -> Text:
        text = Text(line)
        if FAILURE.search(line):
            text.stylize(self.get_component_rich_style("server-log--failure"))
        if self._query:
            text.highlight_regex(
                re.compile(re.escape(self._query), re.IGNORECASE),
                self.get_component_rich_style("server-log--match"),
            )
        return text


def _continuation(old: list[str], new: list[str]) -> list[str] | None:
    """The lines of `new` after the end of `old`, or None when `new` does not continue it."""
    if not old:
        return list(new)
    last = old[-1]
    for index in range(len(new) - 1, -1, -1):
        if new[index] == last:
            overlap = min(index + 1, len(old))
            if new[index + 1 - overlap : index + 1] == old[-overlap:]:
                return new[index + 1 :]
            return None
    return None
