"""Relaunch with another budget: a value, what it leaves the desktop, what it costs the KV pool."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from vramtop.core.headroom import HeadroomInputs, Prediction, predict
from vramtop.tui.format import gib
from vramtop.tui.whatif import STEP, check_budget, step


class BudgetDialog(ModalScreen[float | None]):
    """Returns the budget to relaunch with, or None when dismissed."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # Priority: the field has focus, and a budget never needs a typed "+" or "-".
        Binding("minus", "step(-1)", "-0.01", priority=True),
        Binding("plus,equals_sign", "step(1)", "+0.01", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(
        self,
        suggested: float,
        current: float | None,
        inputs: HeadroomInputs | None,
        why: str | None = None,
    ) -> None:
        super().__init__()
        self._suggested = suggested
        self._current = current
        self._inputs = inputs
        self._why = why

    def compose(self) -> ComposeResult:
        with Vertical(id="budget-dialog", classes="dialog"):
            yield Label("Relaunch vLLM with another budget")
            why = (
                f"--gpu-memory-utilization, {self._why}"
                if self._why
                else "--gpu-memory-utilization"
            )
            yield Static(Content.styled(why, "$text-muted"), id="budget-why")
            yield Input(value=f"{self._suggested:.2f}", id="budget-value")
            yield Static(id="budget-prediction")
            yield Static(id="budget-reason")
            yield Static(
                Content.styled(
                    f"+/- step {STEP:.2f} · enter relaunches · esc cancels", "$text-muted"
                )
            )

    def on_mount(self) -> None:
        self.query_one("#budget-dialog").border_title = "Budget"
        self._refresh_prediction()

    @property
    def value_text(self) -> str:
        return self.query_one("#budget-value", Input).value

    def action_step(self, direction: int) -> None:
        field = self.query_one("#budget-value", Input)
        check = check_budget(field.value, self._inputs)
        base = check.util if check.util is not None else self._suggested
        field.value = f"{step(base, direction * STEP):.2f}"
        field.cursor_position = len(field.value)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._refresh_prediction()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        check = check_budget(event.value, self._inputs)
        if check.reason is None and check.util is not None:
            self.dismiss(check.util)
        else:
            self.app.bell()  # refused in place: the reason is already on screen

    def _refresh_prediction(self) -> None:
        check = check_budget(self.value_text, self._inputs)
        reason = self.query_one("#budget-reason", Static)
        reason.update(
            Content.assemble(("refused: ", "bold $error"), check.reason) if check.reason else ""
        )
        self.query_one("#budget-prediction", Static).update(
            _prediction_text(check.prediction, self._now())
        )

    def _now(self) -> Prediction | None:
        if self._inputs is None or self._current is None:
            return None
        try:
            return predict(self._inputs, self._current)
        except ValueError:
            return None


def _prediction_text(proposed: Prediction | None, now: Prediction | None) -> Content:
    if proposed is None:
        return Content.styled(
            "no prediction (the server's startup terms are not known yet)", "$text-muted"
        )
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
        change = proposed.kv_cache_bytes - now.kv_cache_bytes
        share = change / now.kv_cache_bytes * 100
        parts.append(
            (
                f"\nKV cost {_signed(change)} ({share:+.1f} %) vs now".replace("-", "−"),
                "$warning" if change < 0 else "",
            )
        )
    return Content.assemble(*parts)


def _signed(delta_bytes: int) -> str:
    return f"{'+' if delta_bytes >= 0 else '−'}{gib(abs(delta_bytes), 2)} GiB"
