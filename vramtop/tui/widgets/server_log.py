"""The tail of vLLM's output: searchable, failures highlighted, repeated lines folded."""

from __future__ import annotations

import re
import textwrap
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input

from vramtop.core.log_rows import Row
from vramtop.machines.interface import LOG_KEPT
from vramtop.tui.widgets.kept_lines import KeptLines
from vramtop.tui.widgets.kept_rows import count_badge
from vramtop.tui.widgets.tail_log import TailLog
from vramtop.tui.widgets.typed_input import TypedInput

MAX_LINES = 500  # rows the panel keeps to scroll back to (repeated lines folded)
NO_OUTPUT = "No server output yet."  # shown dim, as a placeholder, not as a line of output


class ServerLog(Vertical):
    COMPONENT_CLASSES: ClassVar[set[str]] = {"server-log--failure", "server-log--match"}
    DEFAULT_CSS = """
    ServerLog { height: 1fr; }
    ServerLog > TailLog { height: 1fr; background: transparent;
        scrollbar-size-vertical: 1; scrollbar-size-horizontal: 0;
    }
    ServerLog > TailLog.-following { scrollbar-size-vertical: 0; }
    ServerLog > Input { display: none; padding: 0 1; }
    ServerLog.-searching > Input { display: block; }
    ServerLog > .server-log--failure { color: $error; text-style: bold; }
    ServerLog > .server-log--match { background: $warning 40%; }
    """

    class KeptLinesWanted(Message):
        """The rows were built anew from a tail (a log that does not continue them): the
        next read should bring every line the backend keeps."""

    def __init__(self, *, id: str | None = None, keep: int = LOG_KEPT) -> None:
        super().__init__(id=id)
        # What the backend keeps (its last `keep` lines), as far as the reads have brought it:
        # a search, or its end, builds the rows anew from all of it, not from the last tail.
        self._kept = KeptLines(keep)
        self._subtitle = ""
        # What came while hidden: lines, notice, clock, and whether the lines are all kept.
        self._waiting: tuple[list[str], str | None, float | None, bool] | None = None
        # Shown in the place of the lines while there are none (dim): NO_OUTPUT, or why
        # nothing can be read, in full (`say_unread`).
        self._placeholder = [NO_OUTPUT]
        self._search: Input | None = None  # the search field, once a search has made it
        # Kept, not looked up: show() runs every tick, and a query walks the DOM.
        self._log = TailLog(self._styled, max_lines=MAX_LINES, classes="-following")

    def compose(self) -> ComposeResult:
        yield self._log

    async def start_search(self) -> None:
        self.add_class("-searching")
        search = self._search
        if search is None:
            # Made the first time a search begins: hidden until then, it cost the console's
            # first frame its widget and its styles. Compact: one row with no border, so the
            # typed text shows (a focused Input's tall border would fill the row and hide it).
            search = self._search = TypedInput(
                placeholder="search the log (enter keeps it, esc clears)",
                id="log-search",
                compact=True,
            )
            await self.mount(search)
        search.focus()

    def on_mount(self) -> None:
        self.border_title = "Server log"
        self._redraw()  # an empty panel says so, instead of a blank box

    def on_show(self) -> None:
        # Shown again (a terminal made larger): what came meanwhile, now rather than a tick
        # later.
        if self._waiting is not None:
            lines, notice, now, kept = self._waiting
            self.show(lines, notice, now=now, kept=kept)

    @property
    def lines(self) -> list[str]:
        return list(self._kept.lines)

    def show(
        self, lines: list[str], notice: str | None = None, *, now: float | None, kept: bool = False
    ) -> None:
        """Append what is new; build the rows anew when the tail no longer continues them (a
        rotated log, a new server, more lines in a tick than a tail holds), then again from
        every line kept once a read brings them. `now`: the console's clock, for when a
        folded row's count is drawn (COUNT_REDRAW_S; None: at once). `kept`: `lines` are
        every line the backend keeps, not only its last ones.

        While the panel is not on screen (another screen covers the console, or a small
        terminal leaves the log out) nothing is drawn: the lines wait, and the first tick
        after it shows again shows them all at once. A hidden widget that repaints makes
        Textual lay out the whole screen again, every tick the server writes a line."""
        if not self.is_attached:
            return  # a read answered while the console closes: its screen is gone
        # Asked for: the rows are built from these, not from the tail they were built from.
        self._kept.offer(lines, kept=kept)
        if self.app.screen is not self.screen or not self.display:
            self._waiting = (lines, notice, now, kept)
            return
        self._waiting = None
        query = self._kept.query
        subtitle = notice or (f"filter: {query}" if query else "")
        if subtitle != self._subtitle:
            # Setting a border title refreshes (and re-styles) the whole log: only on change.
            self._subtitle = subtitle
            self.border_subtitle = subtitle
        log = self._log
        new = self._kept.follow(lines)
        if new is None:  # (or the first lines: they replace "no output yet")
            self._redraw()
            if not kept:
                self._kept.kept_wanted = True
                self.post_message(self.KeptLinesWanted())
            return
        if self._kept.rebuild_due:
            self._redraw()
            return
        if not new:
            log.write_lines([], now)  # a count held back on the last tick with lines
            return
        # Follow the tail only from the tail: someone reading further up keeps their place.
        follow = log.following or log.scroll_y >= log.max_scroll_y
        grown = log.write_lines(self._kept.shown(new), now)
        if follow and grown:  # (rows changed in place: the tail is where it was)
            log.follow_tail()

    def say_unread(self, reason: str | None) -> None:
        """Why nothing can be read (`None`: it can), said whole where the lines go while
        there are none: the status line cuts a reason to one row, and a file vramtop may
        not use is said with its fix (`chmod go-w PATH`), which must be read to the end."""
        placeholder = [NO_OUTPUT]
        if reason is not None:
            width = max(20, self.size.width - 4)
            said = f"Nothing can be read: {reason}"  # a path or a command is never cut
            placeholder = textwrap.wrap(said, width, break_long_words=False, break_on_hyphens=False)
        if placeholder == self._placeholder:
            return
        self._placeholder = placeholder
        if self.is_attached and not self._kept.lines:
            self._redraw()

    def set_query(self, query: str) -> None:
        self._kept.query = query
        self._subtitle = f"filter: {query}" if query else ""
        self.border_subtitle = self._subtitle
        self._redraw()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.set_query(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one(TailLog).focus()

    def key_escape(self) -> None:
        search = self._search
        if search is not None and search.value:
            search.value = ""
        self.remove_class("-searching")
        self.query_one(TailLog).focus()

    def _redraw(self) -> None:
        kept = self._kept
        kept.rebuild_due = False
        log = self._log
        log.clear()
        if not kept.lines:
            log.write_lines(self._placeholder)
            return
        log.write_lines(kept.shown(kept.lines))
        # Another filter, or a rotated log, is another text: a place kept in the old one
        # would point past the new one's end. Start from its tail.
        log.follow_tail()

    def _styled(self, row: Row) -> Text | None:
        """The row's text styled, or None when it has nothing of its own to style (the log
        then shows its line as it is and its count dim: `row_strips.plain_text`)."""
        line, query = row.line, self._kept.query
        if not self._kept.lines and line in self._placeholder:
            return Text(line, style="dim")
        if not row.failure and not (query and self._kept.matches(line)):
            return None
        text = Text(line, no_wrap=True)
        failure = self.get_component_rich_style("server-log--failure") if row.failure else None
        if failure is not None:
            text.stylize(failure)
        if query:
            text.highlight_regex(
                re.compile(re.escape(query), re.IGNORECASE),
                self.get_component_rich_style("server-log--match"),
            )
        # A folded failure keeps its colour on the count too; any other count is quiet.
        text.append(count_badge(row.count), failure or "dim")
        return text
