"""The console draws before it builds its backend (vramtop/machines/deferred_backend.py):
what it shows before, and a build that fails."""

from __future__ import annotations

import threading

import pytest

from tests.support.console import NO_TIMER, settle
from tests.support.fake_backend import FakeBackend
from vramtop.machines.deferred_backend import BackendUnavailable, DeferredBackend
from vramtop.tui.app import VramtopApp


def test_nothing_is_built_until_the_first_read() -> None:
    built: list[FakeBackend] = []

    def build() -> FakeBackend:
        built.append(FakeBackend())
        return built[-1]

    backend = DeferredBackend(build, demo=True, profile_name=None)
    assert backend.demo and backend.profile_name is None and not backend.can_act
    assert not built and not backend.is_built
    backend.close(stop_server=True)  # nothing was started: nothing to stop, nothing built
    assert not built
    sample = backend.tick().sample
    assert len(built) == 1 and backend.is_built and sample.gpu is not None
    assert backend.demo == built[0].demo  # from now on, the backend's own answers
    backend.tick()
    assert len(built) == 1


def test_a_build_that_fails_says_why_at_each_use_and_is_not_retried() -> None:
    calls = []

    def build() -> FakeBackend:
        calls.append(1)
        raise RuntimeError("the simulated machine could not start: no room for its socket")

    backend = DeferredBackend(build, demo=True, profile_name=None)
    for _ in range(2):
        with pytest.raises(BackendUnavailable, match="no room for its socket"):
            backend.tick()
    assert backend.autostart is False  # unknown: nothing is started
    assert backend.demo is True  # still what was known
    assert len(calls) == 1


async def test_the_console_shows_a_failed_build_as_a_failed_read() -> None:
    def build() -> FakeBackend:
        raise RuntimeError("the simulated machine could not start: no room for its socket")

    app = VramtopApp(DeferredBackend(build, demo=True, profile_name=None), NO_TIMER)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.activity is not None
        assert "reading failed" in app.activity and "no room for its socket" in app.activity
        assert app.is_running


async def test_a_slow_build_holds_neither_the_keys_nor_the_start_it_decides() -> None:
    """Whether to start the server is known only once the backend is built: the console asks
    off its event loop, and keeps answering keys meanwhile."""
    building, release = threading.Event(), threading.Event()
    made: list[FakeBackend] = []

    def build() -> FakeBackend:
        building.set()
        release.wait(5)  # a slow start of the simulated machine; let go by the test
        backend = FakeBackend()
        backend.autostart = True
        made.append(backend)
        return backend

    app = VramtopApp(DeferredBackend(build, demo=True, profile_name=None), NO_TIMER)
    async with app.run_test(size=(120, 40)) as pilot:
        while not building.is_set():  # the first frame is drawn, the build under way
            await pilot.pause(0.01)
        theme = app.theme
        await pilot.press("t")
        assert app.theme != theme
        assert not made, "the key waited for the build"
        release.set()
        await settle(pilot)
        assert made and made[0].calls == [("start",)]
