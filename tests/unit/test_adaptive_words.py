"""The adaptive guard's budgets in words (pure): the fullest line, the line while the call
lasts, before any step down, the shorter lines a narrow panel takes, and the state file's
object read (or refused) as it comes."""

from __future__ import annotations

import time

import pytest

from vramtop.core.adaptive_words import AdaptiveState, budget_variants, budget_words

# 14:02 and 14:41 UTC on a fixed day.
DOWN = 1_700_000_000.0 - 1_700_000_000.0 % 86400 + 14 * 3600 + 2 * 60
UP = DOWN + 39 * 60


def utc(t: float) -> str:
    return time.strftime("%H:%M", time.gmtime(t))


def test_the_whole_line_after_a_call_it_stepped_down_and_up_for() -> None:
    state = AdaptiveState(outside=0.93, during=0.85, down=DOWN, up=UP)
    assert not state.in_call
    assert (
        budget_words(state, utc) == "budget: 0.93 outside calls, 0.85 during; down 14:02, up 14:41"
    )


def test_while_the_call_lasts_up_waits_for_the_desktop() -> None:
    state = AdaptiveState(outside=0.93, during=0.85, down=DOWN, up=None)
    assert state.in_call
    words = budget_words(state, utc)
    assert (
        words
        == "budget: 0.93 outside calls, 0.85 during; down 14:02, up when the desktop has settled"
    )
    # An up older than the down (a file written between two steps) is the earlier call's.
    assert AdaptiveState(0.93, 0.85, DOWN, DOWN - 60).in_call


def test_before_any_call_the_outside_budget_alone() -> None:
    assert budget_words(AdaptiveState(outside=0.9), utc) == (
        "budget: 0.90 outside calls; no step down yet"
    )


@pytest.mark.parametrize(
    "state",
    [
        AdaptiveState(0.93, 0.85, DOWN, UP),
        AdaptiveState(0.93, 0.85, DOWN, None),
        AdaptiveState(0.93),
    ],
)
def test_shorter_lines_keep_the_figures_and_fit_a_narrow_panel(state: AdaptiveState) -> None:
    variants = budget_variants(state, utc)
    lengths = [len(v) for v in variants]
    assert lengths == sorted(lengths, reverse=True), variants
    assert len(variants[-1]) <= 36, variants[-1]  # the panel's width in 80 columns
    for variant in variants:
        assert variant.startswith("budget: ") and "0.93" in variant
        if state.down is not None:
            assert "0.85" in variant and "14:02" in variant, variant
        if state.up is not None:
            assert "14:41" in variant, variant


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"outside": 0.93, "during": 0.85, "down": DOWN, "up": UP},
            AdaptiveState(0.93, 0.85, DOWN, UP),
        ),
        ({"outside": 0.93, "during": None, "down": None, "up": None}, AdaptiveState(0.93)),
        ({"outside": 1, "during": "0.8", "down": True}, AdaptiveState(1.0)),
        ({"outside": None, "during": 0.85}, None),
        ({"outside": "0.93"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_the_state_files_object_read_as_it_comes(
    data: dict[str, object] | None, expected: AdaptiveState | None
) -> None:
    assert AdaptiveState.from_json(data) == expected
