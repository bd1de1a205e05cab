"""What a panel does again each second, and what it no longer does: each frame the panels are
shown anew and the rows that changed drawn, so work repeated for what did not change is paid
every second the console is open (bench/bench_console.py measures it against a minimal
Textual app)."""

from __future__ import annotations

import typing
from dataclasses import dataclass

from textual.app import App, ComposeResult
from textual.content import Content
from textual.visual import Visual

from tests.support.calls import calls_into
from vramtop.tui.widgets.text_panel import Facts, Spark, TextPanel


class One(App[None]):
    def compose(self) -> ComposeResult:
        yield TextPanel()


@dataclass(frozen=True)
class TwoLines:
    """A row of a kind the panel has not seen: laid out on lines of its own."""

    words: str

    def lay_out(self, width: int) -> list[Content]:
        return [Content(self.words), Content(self.words.upper())]


def rows(n: int) -> list[object]:
    return [
        f"requests {n} running",
        Facts.split(f"usage {n}.0 % · of 8 GiB"),
        Spark((0.0, float(n), 2.0), ceiling=4.0),
        TwoLines(f"step {n}"),
    ]


def drawn_text(panel: TextPanel) -> list[str]:
    return [panel.render_line(y).text.rstrip() for y in range(len(panel.lines))]


async def test_a_row_is_told_apart_by_its_class_once_not_each_frame() -> None:
    """Whether a row lays itself out on lines or draws one was checked against a Protocol at
    run time for every row of every frame, which looks up the protocol's members each time:
    a third of what drawing a frame's rows cost on the demo."""
    protocol_check = typing._ProtocolMeta.__instancecheck__  # type: ignore[attr-defined]
    app = One()
    async with app.run_test(size=(40, 12)):
        panel = app.query_one(TextPanel)
        panel.set_rows(rows(1))  # type: ignore[arg-type]
        _, checks = calls_into(protocol_check, lambda: panel.set_rows(rows(2)))  # type: ignore[arg-type]
        assert checks == 0
        # Each kind of row still drawn as its kind says.
        assert [line.plain.strip() for line in panel.lines] == [
            "requests 2 running",
            "usage 2.0 % · of 8 GiB",
            "▄▄",
            "step 2",
            "STEP 2",
        ]


async def test_a_line_shown_before_is_not_drawn_into_cells_again() -> None:
    """A figure that comes back (0 running, 1, 0 again) is turned into the terminal's cells
    once: each second about nine lines change on the demo, and several only go back and forth
    between a few values."""
    to_strips = Visual.to_strips.__func__  # type: ignore[attr-defined]
    app = One()
    async with app.run_test(size=(40, 12)):
        panel = app.query_one(TextPanel)
        for n in (0, 1):
            panel.set_rows([f"requests {n} running", "the same"])
            drawn_text(panel)
        panel.set_rows(["requests 0 running", "the same"])
        shown, drawn = calls_into(to_strips, lambda: drawn_text(panel))
        assert shown == ["requests 0 running", "the same"]
        assert drawn == 0
        # The same words in another style are another line: drawn anew, in that style.
        panel.set_rows([Content.styled("requests 0 running", "bold"), "the same"])
        strip, drawn = calls_into(to_strips, lambda: panel.render_line(0))
        assert drawn == 1
        assert any(segment.style and segment.style.bold for segment in strip)
        # Each cell still says which row it is on (a mouse selection reads it).
        panel.set_rows(["the same", "requests 0 running"])
        assert all(
            segment.style.meta["offset"][1] == 1
            for segment in panel.render_line(1)
            if segment.text.strip() and segment.style
        )
