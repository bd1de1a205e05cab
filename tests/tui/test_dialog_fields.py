"""What is typed into the console's dialogs is outside input: no value ends the console, each
one that cannot be used is refused in place with its reason."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.widgets import Input

from tests.support.console import make_app, settle, text, ticks
from tests.support.examples import examples
from tests.support.fake_backend import FakeBackend
from vramtop.core.headroom.terms import Architecture, HeadroomInputs
from vramtop.tui.screens.budget_dialog import BudgetDialog
from vramtop.tui.screens.headroom_screen import HeadroomScreen
from vramtop.tui.whatif import check_budget, what_if_inputs

GIB = 1 << 30
INPUTS = HeadroomInputs(
    total_bytes=32 * GIB,
    architecture=Architecture(full_attention_layers=32, kv_heads=8, head_dim=128),
    weights_bytes=15 * GIB,
    max_model_len=32_768,
)


async def _type(pilot: object, field: Input, value: str) -> None:
    field.value = value
    await settle(pilot)  # type: ignore[arg-type]


async def test_the_budget_field_refuses_nan_inf_and_1e400_and_the_console_stays() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 34)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("b")
        await settle(pilot)
        assert isinstance(app.screen, BudgetDialog)
        field = app.screen.query_one("#budget-value", Input)
        for typed in ("nan", "inf", "-inf", "1e400", "9" * 400, "0x1p-3"):
            await _type(pilot, field, typed)
            assert "type a number" in text(app, "#budget-reason"), typed
            assert text(app, "#budget-fit").strip() == ""
            await pilot.press("enter", "plus", "minus")
            await settle(pilot)
            assert app.is_running and isinstance(app.screen, BudgetDialog)
        assert backend.calls == []


async def test_a_budget_of_0_is_refused_without_a_fits_now_line() -> None:
    app = make_app()
    async with app.run_test(size=(100, 34)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("b")
        await settle(pilot)
        field = app.screen.query_one("#budget-value", Input)
        for typed, says in (
            ("0", "above 0, at most 1"),
            ("0.001", "set in hundredths: 0.001 is below 0.01"),  # above 0: shown 0.00
            ("-0.5", "above 0, at most 1"),
            ("1.5", "above 0, at most 1"),
        ):
            await _type(pilot, field, typed)
            assert says in text(app, "#budget-reason"), typed
            assert "fits now" not in text(app, "#budget-fit"), typed


async def test_the_what_ifs_fields_refuse_what_vllm_would_not_take() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(100, 34)) as pilot:
        await ticks(pilot, 2)
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, HeadroomScreen)
        length = app.screen.query_one("#max-model-len", Input)
        dtype = app.screen.query_one("#kv-dtype", Input)
        for typed in ("0", "-5", "1" * 30, "99999999999"):
            await _type(pilot, length, typed)
            assert "refused: max-model-len" in text(app, "#headroom-table"), typed
            await pilot.press("b")  # nothing to hand over: the reason is on screen
            await settle(pilot)
            assert app.is_running and isinstance(app.screen, HeadroomScreen)
        await _type(pilot, length, "32768")
        for typed in ("fp9", "bogus", "fp\xff"):
            await _type(pilot, dtype, typed)
            assert "refused: KV dtype" in text(app, "#headroom-table"), typed
            await pilot.press("b", "plus")
            await settle(pilot)
            assert app.is_running and isinstance(app.screen, HeadroomScreen)
        await _type(pilot, dtype, "fp8")
        assert "refused" not in text(app, "#headroom-table")
        assert backend.calls == []


typed_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["nan", "inf", "-inf", "1e400", "-0", "0", "1", "1e-400", "0.93", " 0.5 "]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers().map(str),
)


@settings(max_examples=examples(300), deadline=None)
@given(typed=typed_text)
def test_any_typed_budget_is_a_budget_in_range_or_a_reason(typed: str) -> None:
    check = check_budget(typed, INPUTS)
    if check.reason is None:
        assert check.budget is not None and 0 < check.budget <= 1
    if check.budget is not None:
        assert math.isfinite(check.budget)


@settings(max_examples=examples(300), deadline=None)
@given(length=typed_text, dtype=typed_text)
def test_any_typed_what_if_gives_usable_inputs_or_a_reason(length: str, dtype: str) -> None:
    fields = what_if_inputs(INPUTS, length, dtype)
    if fields.problem is None:
        assert 1 <= fields.inputs.max_model_len <= 2**26
    else:
        assert fields.inputs == INPUTS


@pytest.mark.parametrize("typed", ["0.004", "1e-320", "0.0049"])
def test_a_typed_budget_below_a_hundredth_says_so_rather_than_not_above_0(typed: str) -> None:
    check = check_budget(typed, INPUTS)
    assert check.reason == f"the budget is set in hundredths: {typed} is below 0.01"


@pytest.mark.parametrize("typed", ["1_0", "٠.٥", "0x1p-3"])
def test_a_budget_not_typed_plainly_is_no_budget(typed: str) -> None:
    assert check_budget(typed, INPUTS).reason == "type a number such as 0.85"
