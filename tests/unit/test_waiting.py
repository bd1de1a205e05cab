"""The suite's wait helper: it returns what it waited for as soon as it comes, and at the
deadline fails naming what it waited for (no test here depends on how long anything takes)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from tests.support.waiting import stays, wait_event, wait_until, wait_until_async


def true_on_call(n: int) -> tuple[Callable[[], int | None], list[int]]:
    """A predicate false until its `n`th call, then the call's number; and the calls made."""
    calls: list[int] = []

    def predicate() -> int | None:
        calls.append(len(calls) + 1)
        return calls[-1] if calls[-1] >= n else None

    return predicate, calls


def test_wait_until_returns_the_first_true_value_and_asks_no_more() -> None:
    predicate, calls = true_on_call(3)
    assert wait_until(predicate, deadline_s=60, what="the third call", poll_s=0) == 3
    assert calls == [1, 2, 3]


def test_wait_until_fails_at_the_deadline_naming_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match=r"waited 0\.01 s for the door's answer"):
        wait_until(lambda: False, deadline_s=0.01, what="the door's answer")
    last = {"state": "starting"}
    with pytest.raises(AssertionError, match="running; last: starting"):
        wait_until(lambda: False, deadline_s=0, what=lambda: f"running; last: {last['state']}")


def test_wait_event_returns_once_set_and_fails_when_never_set() -> None:
    event = threading.Event()
    threading.Thread(target=event.set).start()
    wait_event(event, deadline_s=60, what="the set")
    with pytest.raises(AssertionError, match="for the other event"):
        wait_event(threading.Event(), deadline_s=0, what="the other event")


def test_stays_fails_at_the_first_moment_the_predicate_turns() -> None:
    stays(lambda: True, for_s=0.01, what="still there")
    predicate, calls = true_on_call(3)
    with pytest.raises(AssertionError, match="held clients: no longer held"):
        stays(lambda: predicate() is None, for_s=60, what="held clients")
    assert calls == [1, 2, 3]


async def test_the_async_wait_lets_the_loop_and_the_pause_run_between_looks() -> None:
    paused: list[int] = []

    async def pause() -> None:
        paused.append(1)

    predicate, calls = true_on_call(3)
    found = await wait_until_async(predicate, deadline_s=60, what="x", pause=pause, poll_s=0)
    assert found == 3 and calls == [1, 2, 3] and len(paused) == 2
    with pytest.raises(AssertionError, match="for the header"):
        await wait_until_async(lambda: False, deadline_s=0, what="the header")
