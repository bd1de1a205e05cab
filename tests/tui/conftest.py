"""Console tests (the helpers: tests.support.console); vramtop's files are kept in a temp dir
by tests/conftest.py's `private_home`, as for every test."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from vramtop.machines.interface import Backend

# How long a console's housekeeping, closed with its backend, may take to end its pass (one
# may end a crashed server's tree and wait for its memory).
HOUSEKEEPING_END_S = 30.0


@pytest.fixture(autouse=True)
def colours(monkeypatch: pytest.MonkeyPatch) -> None:
    """The console in colour, whatever the shell running the tests asks."""
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.fixture
def sim_world(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The simulated machine for a console test (`pytest.mark.usefixtures("sim_world")`): its
    server starts in 0.3 s, and the world of every card a test left running is stopped after
    it (the home is the test's own).

    A console's housekeeping (its thread, started after its first frame) runs until its
    backend is closed (a quit, or `closed_at_end`), not when `run_test` ends. One left running
    goes on in the tests after it in the same process, on the record of the same profile in
    their homes: it started again the door that a later test had killed, with its own world's
    socket in the door's environment, which that test's stop of its world did not find (a door
    left behind for good, seen under load). Such a test fails here."""
    from vramtop.machines.demo_world import stop_demo_world
    from vramtop.sim.card import CARDS

    before = set(threading.enumerate())
    monkeypatch.setenv("VRAMTOP_SIM_STARTUP_S", "0.3")
    try:
        yield
    finally:
        started = [t for t in threading.enumerate() if t.name == "housekeeping"]
        left = [t for t in started if t not in before]
        try:
            wait_until(
                lambda: not any(t.is_alive() for t in left),
                deadline_s=HOUSEKEEPING_END_S,
                what="the console's housekeeping to end: close the backend (quit the console,"
                " or closed_at_end) before the test ends",
            )
        finally:
            for card in CARDS:
                stop_demo_world(card)


@pytest.fixture
def closed_at_end(sim_world: None) -> Iterator[Callable[[Backend], None]]:
    """`closed_at_end(backend)`: the backend closed as the test leaves, its server and door
    stopped, as quitting the console with a stop closes it (`run_test` ending does not; see
    `sim_world`)."""
    backends: list[Backend] = []
    yield backends.append
    for backend in backends:
        backend.close(stop_server=True)
