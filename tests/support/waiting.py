"""Waiting in tests: for a condition or an event, with a deadline, never for a fixed time.

A test that needs wall time (a process really exiting, a socket really answering) asks for
the thing it waits for and gives a generous deadline: on a quiet machine it goes on as soon
as the thing is there, on a loaded one it waits longer instead of failing. At the deadline
it fails naming what it waited for. The polling sleep below is the suite's only wait sleep;
tests/unit/test_wait_rule.py holds every other test module to it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

# How often a condition is asked: short enough that a test goes on at once, long enough
# that asking costs nothing beside the processes being waited for.
POLL_S = 0.02

# The deadline of every wait for something a test's own process, socket or console must come
# to (a process answering or ending, a request reaching one, a frame, a state, an event
# written): a deadline costs nothing while things work, and a shorter guess is what a loaded
# machine breaks. A busy full run (two busy loops beside the suite, a real vLLM loading) saw a
# front door's Python take more than 20 s to answer.
PROCESS_S = 60.0

Words = str | Callable[[], str]


def _failure(what: Words, deadline_s: float) -> AssertionError:
    words = what() if callable(what) else what
    return AssertionError(f"waited {deadline_s:g} s for {words}; it did not come")


def wait_until(
    predicate: Callable[[], T], *, deadline_s: float, what: Words, poll_s: float = POLL_S
) -> T:
    """`predicate()`'s first true value, asked every `poll_s` until `deadline_s` has passed.

    At the deadline: an AssertionError naming `what` (words, or a function that gives words,
    for a message that shows the last state seen)."""
    end = time.monotonic() + deadline_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= end:
            raise _failure(what, deadline_s)
        time.sleep(poll_s)


def wait_event(event: threading.Event, *, deadline_s: float, what: Words) -> None:
    """`event` set, within `deadline_s`; else an AssertionError naming `what`."""
    if not event.wait(deadline_s):
        raise _failure(what, deadline_s)


def stays(predicate: Callable[[], object], *, for_s: float, what: Words) -> None:
    """`predicate()` true all through `for_s` (asked every `POLL_S`), for what must not happen.

    A test that something does NOT come (a step that must not be taken, a process that must
    not end) has to give it time to come: that time is `for_s`, and this fails at the first
    moment the predicate turns false, naming `what`."""
    end = time.monotonic() + for_s
    while True:
        if not predicate():
            words = what() if callable(what) else what
            raise AssertionError(f"{words}: no longer held within {for_s:g} s")
        if time.monotonic() >= end:
            return
        time.sleep(POLL_S)


async def wait_until_async(
    predicate: Callable[[], T],
    *,
    deadline_s: float,
    what: Words,
    pause: Callable[[], Awaitable[object]] | None = None,
    poll_s: float = 0.05,
) -> T:
    """`wait_until` inside an event loop: between two asks it yields to the loop (and awaits
    `pause`, e.g. a Textual Pilot's `pause`, so that the app handles its messages)."""
    end = time.monotonic() + deadline_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= end:
            raise _failure(what, deadline_s)
        await asyncio.sleep(poll_s)
        if pause is not None:
            await pause()
