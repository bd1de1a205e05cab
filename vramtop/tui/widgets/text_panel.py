"""A bordered panel drawn as one widget: its rows are lines of text, sparklines and bars.

One widget per panel, not one per line. Each second a few rows change (rates, usage, their
sparklines); Textual repaints the rectangle around everything that changed and asks every
widget inside it for its lines. With one widget per row that rectangle held twenty widgets,
and asking them cost more than drawing what had changed (bench/bench_console.py). Now it holds
a handful, and a panel repaints only the rows that really look different.

Each row is turned into a Strip on its own (Textual's line API: `render_line`) and kept until
that row changes, the width changes or the styles do. A widget's usual `render` turns all its
lines into Strips again when any one of them changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, cast, runtime_checkable

from textual.cache import LRUCache
from textual.content import Content
from textual.geometry import Region
from textual.reactive import Reactive
from textual.selection import Selection
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import Visual
from textual.widget import Widget

SPARK_BLOCKS = " ▁▂▃▄▅▆▇█"
# Values a panel keeps for its sparklines: four minutes at 1 Hz.
HISTORY = 240
# Lines a panel keeps drawn, beside those it shows (see TextPanel._drawn).
LINES_KEPT = 64


class Drawn(Protocol):
    """A row whose look depends on the panel's width (a sparkline, a bar)."""

    def draw(self, width: int) -> Content: ...


@runtime_checkable
class Laid(Protocol):
    """A row that takes as many lines as the panel's width needs (facts side by side, a
    figure and where it came from): its words are never cut."""

    def lay_out(self, width: int) -> list[Content]: ...


@dataclass(frozen=True)
class Wrapped:
    """Text that takes as many lines as the panel's width needs (a message, such as why
    the GPU cannot be read, that would otherwise be cut off)."""

    text: Content


@dataclass(frozen=True)
class Facts:
    """Facts side by side (a process and its memory, a reading and its figure), on as many
    lines as the panel's width needs: a line breaks between two facts, never inside one (a
    fact wider than the panel wraps on its own); the lines after the first are indented."""

    facts: tuple[Content, ...]
    separator: str = "  "
    indent: int = 2
    whole: Content | None = None  # the line as it was given, drawn as it is where it fits

    @classmethod
    def split(cls, text: Content | str, separator: str = " · ") -> Facts:
        """A line of facts joined by `separator`, to break only there where it does not fit
        (the separator, styled as the line has it, ends the line it breaks)."""
        line = Content(text) if isinstance(text, str) else text
        return cls(tuple(line.split(separator, include_separator=True)), "", whole=line)

    def lay_out(self, width: int) -> list[Content]:
        if self.whole is not None and (width <= 0 or self.whole.cell_length <= width):
            return [self.whole]
        lines: list[Content] = []
        line: Content | None = None
        for fact in self.facts:
            joined = fact if line is None else Content.assemble(line, self.separator, fact)
            if line is None or width <= 0 or joined.rstrip().cell_length <= width:
                line = joined
                continue
            lines.append(line.rstrip())
            line = Content.assemble(" " * self.indent, fact)
        if line is not None:
            lines.append(line.rstrip())
        return [part for line in lines for part in _wrapped(line, width)]


Row = Content | str | Laid | Drawn | Wrapped


@dataclass(frozen=True)
class Detail:
    """A row that small terminals drop (history, detail); every figure stays."""

    row: Row


@dataclass(frozen=True)
class Spark:
    """A sparkline on a fixed scale (0 … ceiling).

    Textual's `Sparkline` stretches its data's own min–max over the height, so 76 ↔ 78 tok/s
    noise looks like a collapse. Here zero is always the bottom, so a real collapse looks
    like one. The newest value is at the right edge.
    """

    data: tuple[float, ...]
    ceiling: float = 1.0
    style: str = "$primary"
    # Raise the ceiling to the largest value *drawn* (not the largest kept): a spike that has
    # scrolled off the left edge no longer flattens what is on screen.
    fit_drawn: bool = False

    def draw(self, width: int) -> Content:
        ceiling = self.ceiling
        if self.fit_drawn and width > 0 and self.data:
            ceiling = max(ceiling, *self.data[-width:])
        return Content.styled(spark_text(self.data, ceiling, width), self.style)


def spark_text(data: Sequence[float], ceiling: float, width: int) -> str:
    values = data[-width:] if width > 0 else ()
    ceiling = ceiling if ceiling > 0 else 1.0
    top = len(SPARK_BLOCKS) - 1
    chars = []
    for value in values:
        level = round(max(0.0, min(1.0, value / ceiling)) * top)
        # Keep a non-zero value visible: a trickle of tokens is not silence.
        chars.append(SPARK_BLOCKS[max(level, 1) if value > 0 else 0])
    return "".join(chars).rjust(max(width, 0))


class TextPanel(Widget):
    DEFAULT_CSS = """
    TextPanel { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    """
    auto_links: Reactive[bool] = Reactive(False)  # no links here: skip styling for them

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._rows: tuple[Row | Detail, ...] = ()
        self._lines: tuple[Content, ...] = ()
        # Strips of the rows drawn so far, by row; valid for one width and one look.
        self._strips: dict[int, Strip] = {}
        self._strips_width = -1
        # Lines turned into Strips before, by their text, with the Content and the look each
        # was drawn from (a line's own Strip, not yet told which row it is on): a figure that
        # comes back (0 running, then 1, then 0 again) is not turned into a Strip again. For
        # one width, as `_strips`.
        self._drawn: LRUCache[str, tuple[Content, VisualStyle, Strip]] = LRUCache(LINES_KEPT)
        # The Wrapped rows laid out last time, by the line they began on: (text, width, lines).
        self._wrapped: dict[int, tuple[Content, int, list[Content]]] = {}

    @property
    def lines(self) -> tuple[Content, ...]:
        """What the panel shows now, one Content per screen line."""
        return self._lines

    def set_rows(self, rows: Sequence[Row | Detail]) -> None:
        self._rows = tuple(rows)
        self.redraw()

    def redraw(self) -> None:
        """Lay the rows out at the current width; repaint only if a line looks different."""
        # Not attached: a sample shown while the console takes its screen down (it has none).
        compact = self.is_attached and self.screen.has_class("-compact")
        width = self.content_region.width
        wrapped = self._wrapped
        self._wrapped = {}
        lines: list[Content] = []
        for row in self._rows:
            if compact and isinstance(row, Detail):
                continue
            shown = row.row if isinstance(row, Detail) else row
            if isinstance(shown, Wrapped):
                # Wrapping is the dearest way to lay a row out, and a wrapped message (why
                # there is no GPU reading) stays the same for as long as it is shown.
                before = wrapped.get(len(lines))
                if before is not None and before[1] == width and before[0].is_same(shown.text):
                    drawn = before[2]
                else:
                    drawn = _draw(shown, width)
                self._wrapped[len(lines)] = (shown.text, width, drawn)
                lines += drawn
            else:
                lines += _draw(shown, width)
        self._show(tuple(lines), width)

    def _show(self, lines: tuple[Content, ...], width: int) -> None:
        before, self._lines = self._lines, lines
        if len(lines) != len(before):
            self._strips.clear()
            self.refresh(layout=True)
            return
        # Repaint the rows that changed, not the whole panel (its border included).
        changed = [
            y
            for y, (new, old) in enumerate(zip(lines, before, strict=True))
            if not new.is_same(old)
        ]
        for y in changed:
            self._strips.pop(y, None)
        if changed:
            self.refresh(*(Region(0, y, width, 1) for y in changed))

    def on_resize(self) -> None:
        self.redraw()

    def notify_style_update(self) -> None:
        # A new theme or class: the rows' colours change with it.
        self._strips.clear()
        self._drawn.clear()
        super().notify_style_update()

    def selection_updated(self, selection: Selection | None) -> None:
        self._strips.clear()  # selected text is drawn highlighted
        self._drawn.clear()  # (a line drawn with or without the selection's highlight)
        super().selection_updated(selection)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width != self._strips_width:
            self._strips.clear()
            self._drawn.clear()
            self._strips_width = width
        self._dirty_regions.clear()  # what Widget's own render_line would have redrawn
        strip = self._strips.get(y)
        if strip is None:
            style = self.visual_style
            if self.text_selection is not None:
                # Drawn with the selection highlighted: the panel as one visual, whose rows
                # know which line of it they are (a row drawn alone is its own line 0). Only
                # while something is selected.
                strips = Visual.to_strips(self, self.render(), width, None, style)
                self._strips.update(enumerate(strips))
                strip = self._strips.get(y)
            elif y < len(self._lines):
                drawn = self._drawn_line(self._lines[y], width, style)
                # Each cell says where it is, for a mouse selection: this row, not line 0.
                strip = drawn.apply_offsets(0, y) if drawn is not None else None
            if strip is None:
                strip = Strip.blank(width, style.rich_style)
            self._strips[y] = strip
        return strip

    def _drawn_line(self, line: Content, width: int, style: VisualStyle) -> Strip | None:
        """`line` as a Strip of its own (its cells say line 0), drawn once for as long as it
        is kept."""
        kept = self._drawn.get(line.plain)
        if kept is not None and kept[0].is_same(line) and kept[1] == style:
            return kept[2]
        strips = Visual.to_strips(self, line, width, 1, style)
        if not strips:
            return None
        self._drawn.set(line.plain, (line, style, strips[0]))
        return strips[0]

    def render(self) -> Content:
        return Content("\n").join(self._lines)


# Whether a class of rows lays itself out on lines (Laid) or draws one (Drawn), by class:
# checked once. Checking against a runtime Protocol looks up its members on each call, and
# was a third of what drawing a frame's rows cost.
_LAYS_OUT: dict[type, bool] = {}


def _draw(row: Row, width: int) -> list[Content]:
    if isinstance(row, Content):
        return [row]
    if isinstance(row, str):
        return [Content(row)]
    if isinstance(row, Wrapped):
        return row.text.wrap(width) if width > 0 else [row.text]
    lays_out = _LAYS_OUT.get(type(row))
    if lays_out is None:
        lays_out = _LAYS_OUT[type(row)] = isinstance(row, Laid)
    if lays_out:
        return cast(Laid, row).lay_out(width)
    return [cast(Drawn, row).draw(width)]


def _wrapped(text: Content, width: int) -> list[Content]:
    """`text` whole on one line where it fits, else wrapped."""
    return text.wrap(width) if width > 0 and text.cell_length > width else [text]
