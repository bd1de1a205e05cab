"""The console draws before it builds its backend (vramtop/machines/deferred_backend.py):
what it shows before, and a build that fails."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.support.console import NO_TIMER, settle
from tests.support.fake_backend import FakeBackend
from tests.support.waiting import PROCESS_S, wait_event, wait_until_async
from vramtop.machines.deferred_backend import RETRY_S, BackendUnavailable, DeferredBackend
from vramtop.supervisor import state
from vramtop.tui.app import VramtopApp
from vramtop.tui.widgets.server_log import ServerLog
from vramtop.tui.widgets.tail_log import TailLog


def test_nothing_is_built_until_the_first_read() -> None:
    built: list[FakeBackend] = []

    def build() -> FakeBackend:
        built.append(FakeBackend())
        return built[-1]

    backend = DeferredBackend(build, demo=True, profile_name=None)
    assert backend.demo and backend.profile_name is None and not backend.can_act
    assert not built and not backend.is_built
    sample = backend.tick().sample
    assert len(built) == 1 and backend.is_built and sample.gpu is not None
    assert backend.demo == built[0].demo  # from now on, the backend's own answers
    backend.tick()
    assert len(built) == 1


def test_closed_before_the_first_read_it_builds_nothing() -> None:
    built: list[FakeBackend] = []
    backend = DeferredBackend(
        lambda: built.append(FakeBackend()) or built[-1], demo=True, profile_name=None
    )
    backend.close(stop_server=True)  # nothing was started: nothing to stop
    with pytest.raises(BackendUnavailable, match="closing"):
        backend.tick()
    assert not built


def test_closed_while_it_builds_it_closes_what_the_build_made() -> None:
    """A quit while the simulated machine starts: the build finishes, then is closed, rather
    than leaving the machine it started running after the console is gone."""
    building, release = threading.Event(), threading.Event()
    made: list[FakeBackend] = []

    def build() -> FakeBackend:
        building.set()
        release.wait(PROCESS_S)
        made.append(FakeBackend())
        return made[-1]

    backend = DeferredBackend(build, demo=True, profile_name=None)
    reader = threading.Thread(target=lambda: backend.autostart)
    reader.start()
    wait_event(building, deadline_s=PROCESS_S, what="the build begun")
    closer = threading.Thread(target=backend.close, args=(True,))
    closer.start()
    closer.join(0.2)
    assert closer.is_alive(), "close did not wait for the build under way"
    release.set()
    closer.join(PROCESS_S)
    reader.join(PROCESS_S)
    assert made and made[0].closed_with is True


def test_a_build_that_fails_says_why_and_is_tried_again_every_few_seconds() -> None:
    calls = []
    now = [0.0]

    def build() -> FakeBackend:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("the simulated machine could not start: no room for its socket")
        return FakeBackend()

    backend = DeferredBackend(
        build, demo=True, profile_name=None, can_act=True, clock=lambda: now[0]
    )
    for _ in range(2):
        with pytest.raises(BackendUnavailable, match="no room for its socket"):
            backend.tick()
    assert backend.autostart is False  # unknown: nothing is started
    assert backend.demo is True  # still what was known
    assert not backend.can_act  # nothing to act on: no start, stop or quit question
    assert len(calls) == 1
    now[0] = RETRY_S
    with pytest.raises(BackendUnavailable):
        backend.tick()
    assert len(calls) == 2
    now[0] = 2 * RETRY_S
    assert backend.tick().sample is not None and backend.can_act
    assert len(calls) == 3


async def test_the_console_shows_a_failed_build_as_a_failed_read() -> None:
    def build() -> FakeBackend:
        raise RuntimeError("the simulated machine could not start: no room for its socket")

    backend = DeferredBackend(build, demo=True, profile_name=None, can_act=True)
    app = VramtopApp(backend, NO_TIMER)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.shown.activity is not None
        assert (
            "reading failed" in app.shown.activity
            and "no room for its socket" in app.shown.activity
        )
        assert "BackendUnavailable" not in app.shown.activity  # the reason, in words
        assert app.is_running
        # Nothing was started, so there is nothing to leave running or to stop: q quits.
        await pilot.press("q")
        await settle(pilot)
        assert not app.is_running


async def test_a_slow_build_holds_neither_the_keys_nor_the_start_it_decides() -> None:
    """Whether to start the server is known only once the backend is built: the console asks
    off its event loop, and keeps answering keys meanwhile."""
    building, release = threading.Event(), threading.Event()
    made: list[FakeBackend] = []

    def build() -> FakeBackend:
        building.set()
        release.wait(PROCESS_S)  # a slow start of the simulated machine; let go by the test
        backend = FakeBackend()
        backend.autostart = True
        made.append(backend)
        return backend

    app = VramtopApp(DeferredBackend(build, demo=True, profile_name=None), NO_TIMER)
    async with app.run_test(size=(120, 40)) as pilot:
        # The first frame is drawn, the build under way.
        await wait_until_async(
            building.is_set, deadline_s=PROCESS_S, what="the build begun", pause=pilot.pause
        )
        theme = app.theme
        await pilot.press("t")
        assert app.theme != theme
        assert not made, "the key waited for the build"
        release.set()
        await settle(pilot)
        assert made and made[0].calls == [("start",)]


def test_a_build_refused_for_a_file_another_user_owns_is_said_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The console's one line for it: the file and the fix, not "[Errno 1] ...".
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    state.save(state.ServerRecord(profile="p1"))
    os.chown(state.state_path("p1"), 65534, -1)

    def build() -> FakeBackend:
        state.load("p1")
        return FakeBackend()

    backend = DeferredBackend(build, demo=False, profile_name="p1")
    with pytest.raises(BackendUnavailable) as refused:
        backend.tick()
    said = str(refused.value)
    assert said.startswith(f"{state.state_path('p1')} belongs to another user"), said
    assert "chown" in said and "Errno" not in said


async def test_a_read_refused_for_a_file_is_said_whole_where_the_log_goes() -> None:
    """The status line cuts a reason to one row; a refusal's fix (`chown … PATH`) is what
    must be read to its end: the log's place says it whole while there is no output."""
    path = "/home/someone/.local/state/vramtop/server-p1.json"
    fix = f"run `chown someone {path}` (or remove it) and try again"
    reason = f"{path} belongs to another user (uid 65534), who could change what it says: {fix}"

    def build() -> FakeBackend:
        raise BackendUnavailable(reason)

    backend = DeferredBackend(build, demo=True, profile_name=None, can_act=True)
    app = VramtopApp(backend, NO_TIMER)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        shown = " ".join(app.query_one(ServerLog).query_one(TailLog).kept.texts)
        assert fix in shown, shown
        assert all(len(text) <= 116 or path in text for text in app.query_one(TailLog).kept.texts)
