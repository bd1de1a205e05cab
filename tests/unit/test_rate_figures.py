"""A token rate above 0 is never written 0 (a collapse to 0.3 tok/s per request read "0/req"
beside a generation that went on), on every surface that writes one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vramtop.core.rate_figures import rate_text


@pytest.mark.parametrize(
    ("value", "digits", "said"),
    [
        (None, 0, "—"),
        (0.0, 0, "0"),
        (0.3, 0, "0.3"),
        (0.49, 0, "0.5"),
        (0.5, 0, "0.5"),  # (rounds half to even: 0 whole)
        (0.04, 0, "<0.1"),
        (0.7, 0, "1"),
        (75.4, 0, "75"),
        (0.04, 1, "0.04"),
        (0.004, 1, "<0.01"),
        (6.4, 1, "6.4"),
    ],
)
def test_a_rate_is_written_whole_but_never_0_above_0(
    value: float | None, digits: int, said: str
) -> None:
    assert rate_text(value, digits) == said


@given(st.floats(min_value=1e-9, max_value=1e6), st.integers(min_value=0, max_value=2))
def test_no_rate_above_0_reads_as_0(value: float, digits: int) -> None:
    words = rate_text(value, digits)
    assert words.startswith("<") or float(words) > 0
