"""A restart's check (`restart_refusal`): the flags the server runs with passed vLLM's startup
checks when it started, so only the free-memory check can come out otherwise, and only where
the desktop holds more now than it did then. What the console's r and the collapse's remedy
(its `restart_fails`) read."""

from __future__ import annotations

from tests.support.synthetic import OUTSIDE_BUDGET_BYTES, Card, Tick
from vramtop.core.model import GIB
from vramtop.core.sample_facts import desktop_bytes, restart_refusal

NATIVE = Card(wsl=False)  # the desktop's share read per process, as on Linux


def test_a_call_that_took_what_the_budget_needs_refuses_the_restart_in_vllms_words() -> None:
    before = NATIVE.sample(Tick(1.0))
    during = NATIVE.sample(Tick(2.0, desktop_bytes=int(4.3 * GIB)))
    at_start = desktop_bytes(before)
    said = restart_refusal(during, OUTSIDE_BUDGET_BYTES, at_start)
    assert said is not None and said.startswith("not restarted (the server keeps serving)")
    assert "Free memory on device cuda:0" in said and "(0.93," in said
    # The same desktop before the call: it starts, as it did.
    assert restart_refusal(before, OUTSIDE_BUDGET_BYTES, at_start) is None


def test_a_desktop_no_bigger_than_at_the_start_never_refuses_it() -> None:
    # Whatever the model of the free memory says: these flags started with this desktop.
    heavy = NATIVE.sample(Tick(1.0, desktop_bytes=int(4.3 * GIB)))
    assert restart_refusal(heavy, OUTSIDE_BUDGET_BYTES, desktop_bytes(heavy)) is None
    # Nor where the desktop's share at the start is not known.
    assert restart_refusal(heavy, OUTSIDE_BUDGET_BYTES, None) is None


def test_a_desktop_that_grew_within_what_the_budget_leaves_does_not_refuse_it() -> None:
    before = NATIVE.sample(Tick(1.0, desktop_bytes=int(0.8 * GIB)))
    grown = NATIVE.sample(Tick(2.0, desktop_bytes=int(1.2 * GIB)))
    assert restart_refusal(grown, OUTSIDE_BUDGET_BYTES, desktop_bytes(before)) is None
