"""Relaunch with another budget: a value, what it leaves the desktop, what it costs the KV pool."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from vramtop.core.bounds import budget_problem
from vramtop.core.budget import (
    BUDGET_NUDGE,
    change_words,
    fit_now,
    is_cpu_server,
    outside_budget,
)
from vramtop.core.headroom.calculator import predict
from vramtop.core.headroom.terms import HeadroomInputs, Prediction
from vramtop.core.remedy import FlagChange
from vramtop.tui.format import gib
from vramtop.tui.whatif import BudgetCheck, Machine, RelaunchChoice, check_budget, nudged
from vramtop.tui.widgets.typed_input import TypedInput


class BudgetDialog(ModalScreen[RelaunchChoice | None]):
    """Returns the flags to relaunch with (the budget, and a shorter --max-model-len where the
    current one no longer fits in it), or None when dismissed."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # Priority: the field has focus, and a budget never needs a typed "+" or "-".
        Binding("minus", "nudge(-1)", "-0.01", priority=True),
        Binding("plus,equals_sign", "nudge(1)", "+0.01", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(
        self,
        suggested: float,
        current: float | None,
        inputs: HeadroomInputs | None,
        why: str | None = None,
        machine: Machine | None = None,
        kept: FlagChange | None = None,
    ) -> None:
        """`kept`: the headroom what-if's flags, relaunched with the budget chosen here."""
        super().__init__()
        self._kept = kept
        self._suggested = suggested
        self._current = current
        self._inputs = inputs
        self._why = why
        self._machine = machine or Machine()
        # The value a first Enter was refused for because it does not fit now: a second Enter
        # on the same value relaunches anyway.
        self._armed: float | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="budget-dialog", classes="dialog"):
            yield Label("Relaunch vLLM with another budget")
            why = (
                f"--gpu-memory-utilization, {self._why}"
                if self._why
                else "--gpu-memory-utilization"
            )
            yield Static(Content.styled(why, "$text-muted"), id="budget-why")
            yield TypedInput(value=f"{self._suggested:.2f}", id="budget-value")
            yield Static(id="budget-prediction")
            yield Static(id="budget-fit")
            yield Static(id="budget-reason")
            yield Static(
                Content.styled(
                    f"+/- by {BUDGET_NUDGE:.2f} · enter relaunches · esc cancels", "$text-muted"
                )
            )

    def on_mount(self) -> None:
        self.query_one("#budget-dialog").border_title = "Budget"
        self._refresh_prediction()

    @property
    def value_text(self) -> str:
        return self.query_one("#budget-value", Input).value

    def action_nudge(self, direction: int) -> None:
        field = self.query_one("#budget-value", Input)
        check = self._check(field.value)
        base = check.budget if check.budget is not None else self._suggested
        field.value = f"{nudged(base, direction * BUDGET_NUDGE):.2f}"
        field.cursor_position = len(field.value)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._refresh_prediction()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        check = self._check(event.value)
        if check.reason is not None or check.budget is None:
            self.app.bell()  # refused in place: the reason is already on screen
        elif check.needs_confirmation and self._armed != check.budget:
            self._armed = check.budget
            self.app.bell()
            self._refresh_prediction()
        else:
            change = check.change(self._kept)
            self.dismiss(RelaunchChoice(change, forced=check.needs_confirmation))

    def _check(self, text: str) -> BudgetCheck:
        return check_budget(text, self._inputs, self._machine)

    def _refresh_prediction(self) -> None:
        check = self._check(self.value_text)
        if check.budget != self._armed:
            self._armed = None
        self.query_one("#budget-reason", Static).update(self._reason_text(check))
        # A value that is no budget has no "fits now" (0 read "fits now: yes (needs 0.00 GiB)").
        no_budget = check.budget is None or budget_problem(check.budget) is not None
        fit_util = None if no_budget else check.budget
        self.query_one("#budget-fit", Static).update(self._fit_text(fit_util))
        self.query_one("#budget-prediction", Static).update(
            _prediction_text(
                check.prediction, self._now(), check, cpu=is_cpu_server(self._machine.device_kind)
            )
        )

    def _reason_text(self, check: BudgetCheck) -> Content:
        if check.reason:
            return Content.assemble(("refused: ", "bold $error"), check.reason)
        lines: list[str | tuple[str, str]] = []
        for warning in check.warnings:
            style = "$text-muted" if warning.severity == "note" else "bold $warning"
            lines += ["\n" if lines else "", (warning.text, style)]
        if check.needs_confirmation:
            word = (
                "again to relaunch anyway" if self._armed == check.budget else "twice to relaunch"
            )
            lines += ["\n", (f"press enter {word}", "bold $error")]
        return Content.assemble(*lines)

    def _fit_text(self, util: float | None) -> Content:
        """`fits now: yes (needs 27.38 GiB; vLLM would find 27.90 GiB free)`, when the desktop's
        share is known."""
        m = self._machine
        total = m.total_bytes or (self._inputs.total_bytes if self._inputs else None)
        if util is None or total is None or m.desktop_bytes is None:
            return Content("")
        if is_cpu_server(m.device_kind):
            return Content("")
        outside = m.outside_budget_bytes
        if outside is None and self._inputs is not None:
            outside = self._inputs.outside_budget_bytes
        fit = fit_now(total, util, m.desktop_bytes, outside_budget(outside))
        style = "bold $error" if not fit.fits else "bold $warning" if fit.tight else "bold"
        return Content.styled(fit.text(), style)

    def _now(self) -> Prediction | None:
        if self._inputs is None or self._current is None:
            return None
        try:
            return predict(self._inputs, self._current)
        except ValueError:
            return None


def _prediction_text(
    proposed: Prediction | None, now: Prediction | None, check: BudgetCheck, *, cpu: bool = False
) -> Content:
    if proposed is None:
        # (A CPU server's pool never follows from the budget: waiting would not help.)
        why = "for a CPU server" if cpu else "(the server's startup terms are not known yet)"
        return Content.styled(f"no prediction {why}", "$text-muted")
    parts: list[str | tuple[str, str]] = [
        f"budget {gib(proposed.budget_bytes, 2)} GiB · desktop headroom ",
        (f"{gib(proposed.desktop_headroom_bytes, 2)} GiB", "bold"),
    ]
    if now is not None:
        parts.append(f" ({_signed(proposed.desktop_headroom_bytes - now.desktop_headroom_bytes)})")
    parts += [
        "\nKV pool ",
        (f"{gib(proposed.kv_cache_bytes, 2)} GiB", "bold"),
        f" · {proposed.kv_cache_tokens:,} tokens · {proposed.max_concurrency:.2f}× concurrency",
    ]
    if now is not None and now.kv_cache_bytes > 0:
        costs = proposed.kv_cache_tokens < now.kv_cache_tokens
        parts.append(("\n" + change_words(now, proposed), "$warning" if costs else ""))
    flags = check.flags
    if flags is not None and flags.max_model_len is not None:
        # vLLM would refuse the current ceiling in this pool: the relaunch lowers it too.
        parts += [
            "\nwith ",
            (f"--max-model-len {flags.max_model_len:,}", "bold"),
            (f": {flags.current_max_model_len:,} no longer fits in this pool", "$warning"),
        ]
    return Content.assemble(*parts)


def _signed(delta_bytes: int) -> str:
    return f"{'+' if delta_bytes >= 0 else '−'}{gib(abs(delta_bytes), 2)} GiB"
