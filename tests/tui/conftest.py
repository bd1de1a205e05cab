"""Console tests (the helpers: tests.support.console); vramtop's files are kept in a temp dir
by tests/conftest.py's `private_home`, as for every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def colours(monkeypatch: pytest.MonkeyPatch) -> None:
    """The console in colour, whatever the shell running the tests asks."""
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.fixture
def sim_world(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The simulated machine for a console test (`pytest.mark.usefixtures("sim_world")`): its
    server starts in 0.3 s, and the world of every card a test left running is stopped after
    it (the home is the test's own)."""
    from vramtop.machines.demo_world import stop_demo_world
    from vramtop.sim.card import CARDS

    monkeypatch.setenv("VRAMTOP_SIM_STARTUP_S", "0.3")
    try:
        yield
    finally:
        for card in CARDS:
            stop_demo_world(card)
