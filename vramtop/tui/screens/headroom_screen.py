"""What-if on the budget, from the live server's terms: now vs a proposal, side by side."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from vramtop.core.budget import BUDGET_NUDGE, GIB, change_words, shortfall_words
from vramtop.core.diagnosis.suggested_budget import suggest_budget
from vramtop.core.headroom.calculator import largest_util_for_headroom, predict
from vramtop.core.headroom.flags import RelaunchFlags, relaunch_flags, smallest_serving_util
from vramtop.core.headroom.terms import HeadroomError, HeadroomInputs, Prediction
from vramtop.core.model import Sample, ServerState
from vramtop.core.remedy import FlagChange
from vramtop.tui.format import gib
from vramtop.tui.whatif import WhatIfFields, nudged, what_if_inputs
from vramtop.tui.widgets.typed_input import TypedInput


class HeadroomScreen(ModalScreen[FlagChange | None]):
    """Answers the what-if's flags: the budget, and the flags it changes (None: kept)."""

    # No field focused at first: a focused field would swallow the b and +/- keys.
    AUTO_FOCUS = ""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("minus", "nudge(-1)", "-0.01", priority=True),
        Binding("plus,equals_sign", "nudge(1)", "+0.01", priority=True),
        Binding("b", "propose", "Relaunch with this", priority=True),
        Binding("escape,c", "close", "Close"),
    ]

    def __init__(
        self,
        inputs: HeadroomInputs | None,
        current_util: float | None,
        desktop_peak_bytes: int | None,
        min_desktop_headroom_gib: float,
        launch_util: float | None = None,
        suggested: tuple[float, str] | None = None,
        no_terms_why: str | None = None,
    ) -> None:
        """`launch_util`: the profile's own budget; `suggested`: an open finding's budget and
        where it comes from (the banner's figure, shown here unchanged)."""
        super().__init__()
        self._inputs = inputs
        self._current = current_util
        self._peak = desktop_peak_bytes
        self._min_headroom_gib = min_desktop_headroom_gib
        self._launch = launch_util
        self._suggested = suggested
        self._no_terms_why = no_terms_why  # why there are no live terms (see `no_terms`)
        # Opens on the suggestion when there is one: the figures the banner and `b` show.
        self.proposed = (suggested[0] if suggested else None) or current_util or 0.9

    def compose(self) -> ComposeResult:
        with Vertical(id="headroom", classes="dialog"):
            if self._inputs is None:
                yield Label(self._no_terms_why or no_terms(None), id="headroom-none")
                return
            yield Static(id="headroom-table")
            with Horizontal(classes="fields"):
                yield Label("max-model-len ")
                yield TypedInput(
                    str(self._inputs.max_model_len), id="max-model-len", type="integer"
                )
                yield Label(" KV dtype ")
                yield TypedInput(self._inputs.kv_cache_dtype, id="kv-dtype")
            yield Static(id="headroom-peak")
            yield Static(
                Content.styled(
                    "+/- budget · b hands the proposal to the relaunch dialog · tab edits a field, "
                    "enter leaves it · esc closes",
                    "$text-muted",
                )
            )

    def on_mount(self) -> None:
        self.query_one("#headroom").border_title = "Headroom: what if"
        self._refresh()

    def _fields(self) -> WhatIfFields | None:
        """The typed fields read against the live terms (None: no live terms)."""
        if self._inputs is None:
            return None
        return what_if_inputs(
            self._inputs,
            self.query_one("#max-model-len", Input).value,
            self.query_one("#kv-dtype", Input).value,
        )

    def _what_if_inputs(self) -> HeadroomInputs | None:
        fields = self._fields()
        return fields.inputs if fields is not None else None

    def action_nudge(self, direction: int) -> None:
        self.proposed = nudged(self.proposed, direction * BUDGET_NUDGE)
        self._refresh()

    def on_input_changed(self) -> None:
        self._refresh()

    def on_input_submitted(self) -> None:
        self.set_focus(None)

    def action_propose(self) -> None:
        fields = self._fields()
        if fields is not None and fields.problem is not None:
            self.app.bell()  # a field vLLM would not take: its reason is on screen
            return
        inputs = self._what_if_inputs()
        base = self._inputs
        if inputs is not None:
            # A ceiling vLLM would refuse in this pool is proposed as the one that fits.
            flags = _safe_flags(inputs, self.proposed)
            if flags is not None and flags.max_model_len is not None:
                inputs = replace(inputs, max_model_len=flags.max_model_len)
        changed_len = (
            inputs.max_model_len
            if inputs and base and inputs.max_model_len != base.max_model_len
            else None
        )
        changed_dtype = (
            inputs.kv_cache_dtype
            if inputs and base and inputs.kv_cache_dtype != base.kv_cache_dtype
            else None
        )
        self.dismiss(FlagChange(self.proposed, changed_len, changed_dtype))

    def action_close(self) -> None:
        self.dismiss(None)

    def _refresh(self) -> None:
        fields = self._fields()
        if fields is None or self._inputs is None:
            return
        inputs = fields.inputs
        now = _safe_predict(self._inputs, self._current)
        proposed: Prediction | str
        try:
            if fields.problem is not None:
                proposed = fields.problem
            else:
                proposed = predict(inputs, self.proposed)
            table = _table(now, proposed, inputs)
            if not isinstance(proposed, str):
                table = Content.assemble(table, self._changes(inputs, now, proposed))
            peak = self._peak_line(inputs)
        except (HeadroomError, ArithmeticError) as error:
            # Terms the model cannot use (what the fields let through, or the server's): said
            # in place, the console stays.
            table, peak = _table(now, str(error), inputs), Content("")
        self.query_one("#headroom-table", Static).update(table)
        self.query_one("#headroom-peak", Static).update(peak)

    def _changes(
        self, inputs: HeadroomInputs, now: Prediction | None, proposed: Prediction
    ) -> Content:
        """The proposal against now and against the profile's launch budget, in words."""
        lines: list[str | tuple[str, str]] = []
        if now is not None and now.budget != proposed.budget:
            lines += ["\nvs now: ", change_words(now, proposed)]
        launch = _safe_predict(inputs, self._launch)
        same_as_now = now is not None and launch is not None and launch.budget == now.budget
        if launch is not None and launch.budget != proposed.budget and not same_as_now:
            lines += ["\nvs the profile's launch budget: ", change_words(launch, proposed)]
        return Content.assemble(*lines)

    def _peak_line(self, inputs: HeadroomInputs) -> Content:
        wanted = int(self._min_headroom_gib * GIB)
        parts: list[str | tuple[str, str]] = [
            f"for {self._min_headroom_gib:g} GiB desktop headroom: budget ",
            (f"{largest_util_for_headroom(inputs, wanted):.2f}", "bold"),
        ]
        if self._suggested is not None:
            util, source = self._suggested
            parts += ["\nsuggested budget ", (_flag_words(inputs, util), "bold"), f" ({source})"]
        elif self._peak is not None:
            # The finding's rule, with what the console knows (no squeeze seen: no cap at the
            # current budget, no unseen demand).
            suggestion = suggest_budget(
                inputs.total_bytes,
                self._peak,
                outside_budget_bytes=predict(inputs, self.proposed).outside_budget_bytes,
                smallest_serving=_safe_smallest(inputs),
            )
            parts += [
                f"\ndesktop peak this session {gib(self._peak, 2)} GiB → suggested budget ",
                (_flag_words(inputs, suggestion.budget), "bold"),
                f" (leaves {gib(suggestion.desktop_headroom_bytes, 2)} GiB: "
                "the peak plus a margin)",
            ]
        return Content.assemble(*parts)


def _flag_words(inputs: HeadroomInputs, util: float) -> str:
    """`0.85`, or `0.85 with --max-model-len 163,840 (262,144 no longer fits)`: the flags a
    relaunch at `util` needs, as the banner and the relaunch dialog name them."""
    flags = relaunch_flags(inputs, util)
    return flags.words() if flags is not None else f"{util:.2f}"


def _safe_smallest(inputs: HeadroomInputs) -> float | None:
    try:
        return smallest_serving_util(inputs)
    except HeadroomError:
        return None


def _safe_flags(inputs: HeadroomInputs, util: float) -> RelaunchFlags | None:
    try:
        return relaunch_flags(inputs, util)
    except HeadroomError:
        return None


def _safe_predict(inputs: HeadroomInputs, util: float | None) -> Prediction | None:
    if util is None:
        return None
    try:
        return predict(inputs, util)
    except HeadroomError:
        return None


def _table(now: Prediction | None, proposed: Prediction | str, inputs: HeadroomInputs) -> Content:
    if isinstance(proposed, str):
        return Content.assemble(("refused: ", "bold $error"), proposed)
    rows: list[tuple[str, str, str, str]] = [("", "now", "proposed", "change")]

    def row(label: str, value: Any, fmt: Any) -> None:
        a = fmt(value(now)) if now else "—"
        b = fmt(value(proposed))
        diff = fmt(value(proposed) - value(now), signed=True) if now else ""
        rows.append((label, a, b, diff))

    row("budget", lambda p: p.budget, lambda v, signed=False: f"{v:+.2f}" if signed else f"{v:.2f}")
    row("budget GiB", lambda p: p.budget_bytes, _gib_fmt)
    row("desktop headroom", lambda p: p.desktop_headroom_bytes, _gib_fmt)
    row("KV pool GiB", lambda p: p.kv_cache_bytes, _gib_fmt)
    row(
        "KV tokens",
        lambda p: p.kv_cache_tokens,
        lambda v, signed=False: f"{v:+,}" if signed else f"{v:,}",
    )
    row(
        "concurrency",
        lambda p: p.max_concurrency,
        lambda v, signed=False: f"{v:+.2f}×" if signed else f"{v:.2f}×",
    )
    lines = [f"{a:<17}{b:>10}{c:>10}{d:>10}" for a, b, c, d in rows]
    text = "\n".join(lines)
    if proposed.estimated:
        text += f"\nestimated terms: {', '.join(proposed.estimated)}"
    if proposed.kv_cache_bytes <= 0:
        why = (
            f"it is {shortfall_words(proposed)}"
            if proposed.kv_shortfall_bytes > 0
            else "no room for a KV pool"
        )
        return Content.assemble(text, (f"\nthis budget would not start: {why}", "bold $error"))
    if not proposed.fits:
        # vLLM's startup check: one request of max-model-len must fit in the pool.
        flags = relaunch_flags(inputs, proposed.budget)
        fix = (
            f"; --max-model-len {flags.max_model_len:,} fits (b proposes it)"
            if flags is not None and flags.max_model_len is not None
            else ""
        )
        return Content.assemble(
            text,
            (
                f"\nvLLM would refuse it: the pool holds less than one "
                f"{inputs.max_model_len:,}-token request{fix}",
                "$text-warning",
            ),
        )
    return Content(text)


def _gib_fmt(value: int, signed: bool = False) -> str:
    return f"{value / GIB:+.2f}" if signed else f"{value / GIB:.2f}"


def no_terms(sample: Sample | None) -> str:
    """Why the calculator has no live terms, and what to do, for the state the console is in:
    a running server is not told to start."""
    info = sample.info if sample else None
    running = info is not None and info.state in (ServerState.RUNNING, ServerState.STARTING)
    server = sample.server if sample else None
    if info is None and server is not None and server.reachable:
        running = True  # watching a URL: it is up
    head = "No live terms: the headroom calculator needs "
    if not running:
        return (
            head + "a running server's startup log (weights, KV pool). Start the server "
            "(s), or use `vramtop calc`."
        )
    if sample is not None and not sample.gpu.devices:
        why = (sample.gpu.error or "no GPU reading").rstrip(". ")
        return (
            head + f"the card's total memory, and the GPU cannot be read: {why}. "
            "`vramtop calc --total-gib N` works from numbers you give it."
        )
    return (
        head + "the server's KV pool, which it has not reported yet (it is still loading, "
        "or its startup log and /metrics do not say). `vramtop calc` works from numbers "
        "you give it."
    )
