"""One box of the fleet, read-only: its panels as the console draws them (the VRAM bar, the
KV pool and the rates, in the console's text panels), fed from the box's exporter page each
second; Escape goes back to the rows. A box without a fresh sample shows why, and no figure.

`StepsScreen` (`e`): the box's recent steps, where its exporter serves them (the latest of
each kind, and how many since the exporter started, by who asked); it says so where it does
not.
"""

from __future__ import annotations

from collections import deque
from typing import ClassVar, Protocol

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static

from vramtop.core.fleet_panels import STEPS_NOT_SERVED, BoxFigures, BoxStep, figures, steps_of
from vramtop.core.fleet_rows import BoxRow, Page, Status
from vramtop.core.model import GIB
from vramtop.core.rate_figures import rate_text
from vramtop.tui.fleet.cells import findings
from vramtop.tui.format import count, gib
from vramtop.tui.widgets.text_panel import HISTORY, Detail, Row, Spark, TextPanel
from vramtop.tui.widgets.throughput_panel import local_hhmm
from vramtop.tui.widgets.vram_bar import VramBar
from vramtop.tui.widgets.vram_split_panel import split_figures

REFRESH_S = 1.0


class Fleet(Protocol):
    """What a box's screen reads of the fleet console."""

    def rows(self) -> list[BoxRow]: ...

    def page(self, name: str) -> Page | None: ...


class BoxScreen(Screen[None]):
    """A box's panels, read-only."""

    CSS = """
    #box-status { padding: 0 1; }
    #box-status.down { background: $error; }
    TextPanel { border: round $primary; margin: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="back"),
        Binding("e", "steps", "Steps", id="box_steps"),
    ]

    def __init__(self, name: str) -> None:
        super().__init__()
        self.box = name
        self._kv: deque[float] = deque(maxlen=HISTORY)
        self._rate: deque[float] = deque(maxlen=HISTORY)
        self._rate_ceiling = 1.0
        self._last_samples: int | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="box-status")
        with VerticalScroll():
            yield TextPanel(id="vram")
            yield TextPanel(id="kv")
            yield TextPanel(id="rates")
            yield TextPanel(id="counted")
        yield Footer()

    def on_mount(self) -> None:
        titles = {"vram": "VRAM split", "kv": "KV pool", "rates": "throughput", "counted": "box"}
        for panel_id, title in titles.items():
            self.query_one(f"#{panel_id}", TextPanel).border_title = title
        self.refresh_panels()
        self.set_interval(REFRESH_S, self.refresh_panels)

    def _fleet(self) -> Fleet:
        app: Fleet = self.app  # type: ignore[assignment]  # FleetApp: see fleet_app.py
        return app

    def refresh_panels(self) -> None:
        fleet = self._fleet()
        row = next((one for one in fleet.rows() if one.name == self.box), None)
        page = fleet.page(self.box)
        status = self.query_one("#box-status", Static)
        panels = [
            self.query_one(f"#{one}", TextPanel) for one in ("vram", "kv", "rates", "counted")
        ]
        if row is None or row.status is not Status.UP or page is None:
            # No figure of an earlier answer: the panels empty, the reason said.
            why = "not known" if row is None else f"{row.status.value}: {row.problem or ''}"
            status.update(Content.assemble((f"{self.box} ", "bold"), why, " · no figures shown"))
            status.set_class(True, "down")
            for panel in panels:
                panel.set_rows([])
            return
        status.set_class(False, "down")
        status.update(_status_line(row))
        shown = figures(page)
        if row.samples != self._last_samples:  # one point per new sample of the box
            self._last_samples = row.samples
            self._kv.append(shown.kv_usage or 0.0)
            self._rate.append(shown.generation_tps or 0.0)
            self._rate_ceiling = max(self._rate_ceiling, shown.generation_tps or 0.0)
        vram, kv, rates, counted = panels
        vram.set_rows(_vram_rows(shown))
        kv.set_rows([*_kv_rows(shown), Detail(Spark(tuple(self._kv), ceiling=1.0))])
        rates.set_rows(
            [*_rate_rows(shown), Detail(Spark(tuple(self._rate), ceiling=self._rate_ceiling))]
        )
        counted.set_rows(_counted_rows(row, shown))

    def action_steps(self) -> None:
        self.app.push_screen(StepsScreen(self.box))


def _status_line(row: BoxRow) -> Content:
    age = "—" if row.sample_age_s is None else f"{row.sample_age_s:.0f} s"
    where = row.instance or row.url
    return Content.assemble(
        (row.name, "bold"),
        f" · {row.card or '—'} · {row.platform or '—'} · {row.server_state or '—'} · ",
        (f"sample {age} old · {where} · read-only", "$text-muted"),
    )


def _vram_rows(shown: BoxFigures) -> list[Row | Detail]:
    split = shown.split
    if split is None:
        return [VramBar(None), "the card is not on the box's page"]
    budget = "—" if split.budget_bytes is None else f"{gib(split.budget_bytes)} GiB"
    headroom = "—" if split.headroom_bytes is None else f"{gib(split.headroom_bytes)} GiB"
    return [
        VramBar(split),
        split_figures(split),
        f"budget {budget} · desktop headroom {headroom}",
    ]


def _kv_rows(shown: BoxFigures) -> list[Row | Detail]:
    size = (
        "size not served"
        if shown.kv_pool_bytes is None
        else f"{shown.kv_pool_bytes / GIB:.2f} GiB · {count(shown.kv_pool_tokens)} tokens"
    )
    usage = "usage —" if shown.kv_usage is None else f"usage {shown.kv_usage * 100:.1f} %"
    max_len = (
        "" if shown.max_model_len is None else f" · --max-model-len {count(shown.max_model_len)}"
    )
    return [
        size + max_len,
        f"{usage} · {count(shown.running)} running · {count(shown.waiting)} waiting",
    ]


def _rate_rows(shown: BoxFigures) -> list[Row | Detail]:
    return [
        f"generation {rate_text(shown.generation_tps)} tok/s (normal "
        f"{rate_text(shown.generation_normal_tps)})",
        f"per request {rate_text(shown.request_tps)} tok/s "
        f"(normal {rate_text(shown.request_normal_tps)})",
    ]


def _counted_rows(row: BoxRow, shown: BoxFigures) -> list[Row | Detail]:
    open_now = Content.styled(findings(row), "bold $error" if row.collapse else "")
    opened = ", ".join(f"{kind} {value:.0f}" for kind, value in shown.findings_opened) or "none"
    serves = " · ".join(
        part
        for part in (shown.profile and f"profile {shown.profile}", shown.model, shown.vllm_version)
        if part
    )
    return [
        Content.assemble("open findings: ", open_now),
        f"opened since the exporter's start: {opened}",
        f"restarts {count(shown.restarts)} · crashes {count(shown.crashes)}",
        Detail(Content.styled(serves or "what it serves: not known", "$text-muted")),
    ]


class StepsScreen(Screen[None]):
    """A box's recent steps, where its exporter serves them; else it says so. Read again
    each second from the box's page; a box without a fresh sample shows why, no step."""

    CSS = "#steps { padding: 1 2; }"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="back"),
    ]

    def __init__(self, name: str) -> None:
        super().__init__()
        self.box = name

    def compose(self) -> ComposeResult:
        yield Static(id="steps")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_steps()
        self.set_interval(REFRESH_S, self.refresh_steps)

    def refresh_steps(self) -> None:
        app: Fleet = self.app  # type: ignore[assignment]  # FleetApp: see fleet_app.py
        row = next((one for one in app.rows() if one.name == self.box), None)
        page = app.page(self.box)
        if row is None or row.status is not Status.UP or page is None:
            why = "not known" if row is None else f"{row.status.value}: {row.problem or ''}"
            words = f"{self.box} {why} · no steps shown"
        else:
            steps = steps_of(page)
            words = (
                STEPS_NOT_SERVED.format(name=self.box)
                if steps is None
                else steps_words(self.box, steps)
            )
        self.query_one("#steps", Static).update(Content(words))


def steps_words(name: str, steps: list[BoxStep]) -> str:
    """A line per kind: `restart   last 14:02 by guard · ok · 74 s · 2 counted (guard 1,
    key 1)` (counted since the box's exporter started)."""
    lines = [f"{name}'s steps (the latest of each kind; counted since its exporter started)"]
    for step in steps:
        if step.last_t is None:
            last = "none in its timeline"
        else:
            parts = [f"last {local_hhmm(step.last_t)}"]
            if step.last_asked_by:
                parts[0] += f" by {step.last_asked_by}"
            parts += [one for one in (step.last_result,) if one]
            if step.last_total_s is not None:
                parts.append(f"{step.last_total_s:.0f} s")
            last = " · ".join(parts)
        total = sum(n for _, n in step.counted)
        by = ", ".join(f"{who} {n}" for who, n in step.counted)
        since = f"{total} counted" + (f" ({by})" if by else "")
        lines.append(f"{step.kind:<8}  {last} · {since}")
    return "\n".join(lines)
