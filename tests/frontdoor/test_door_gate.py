"""The door's holding logic in one event loop: order, drain, fail and the hold timeout."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.waiting import PROCESS_S, wait_until_async
from vramtop.frontdoor.gate import Gate, Refusal

UP = "http://127.0.0.1:8001"


async def test_held_requests_go_in_arrival_order_to_the_new_upstream() -> None:
    gate = Gate(UP, hold_s=60)
    assert await gate.hold(drain_s=1) is True
    done: list[tuple[int, str]] = []

    async def request(i: int) -> None:
        done.append((i, await gate.admit()))

    tasks = []
    for i in range(5):
        tasks.append(asyncio.create_task(request(i)))
        await asyncio.sleep(0)  # each arrives after the one before
    await wait_until_async(lambda: gate.held == 5, deadline_s=PROCESS_S, what="five requests held")
    assert done == []
    assert gate.release("http://127.0.0.1:9002") == 5
    await asyncio.gather(*tasks)
    assert done == [(i, "http://127.0.0.1:9002") for i in range(5)]
    assert (gate.in_flight, gate.held, gate.holding) == (5, 0, False)


async def test_a_request_sent_again_keeps_its_place_by_its_first_arrival() -> None:
    now = [100.0]
    gate = Gate(UP, hold_s=60, clock=lambda: now[0])
    gate.start_holding()
    done: list[str] = []

    async def request(name: str, arrived: float | None) -> None:
        await gate.admit(arrived)
        done.append(name)

    # Two new requests held at 100 s and 101 s; then one a hold recalled, that had first
    # arrived at 99 s, and one recalled that had come at 100.5 s.
    tasks = []
    for name, at, arrived in [("new1", 100.0, None), ("new2", 101.0, None),
                              ("again99", 102.0, 99.0), ("again100", 102.0, 100.5)]:  # fmt: skip
        now[0] = at
        tasks.append(asyncio.create_task(request(name, arrived)))
        count = len(tasks)
        await wait_until_async(
            lambda n=count: gate.held == n, deadline_s=PROCESS_S, what=f"{count} held"
        )
    assert gate.release(None) == 4
    await asyncio.gather(*tasks)
    assert done == ["again99", "new1", "again100", "new2"]


async def test_hold_returns_once_the_last_request_in_flight_ends() -> None:
    gate = Gate(UP, hold_s=60)
    assert await gate.admit() == UP
    assert await gate.admit() == UP
    drain = asyncio.create_task(gate.hold(drain_s=30))
    await wait_until_async(lambda: gate.holding, deadline_s=PROCESS_S, what="the hold begun")
    gate.finished(ok=True)
    for _ in range(5):  # turns of the loop in which a wrong drain would end
        await asyncio.sleep(0)
    assert not drain.done()
    gate.finished(ok=True)
    assert await asyncio.wait_for(drain, 5) is True
    assert gate.served == 2
    assert await gate.hold(drain_s=0) is True  # none in flight: at once


async def test_a_drain_that_runs_out_says_so() -> None:
    gate = Gate(UP, hold_s=60)
    await gate.admit()
    assert await gate.hold(drain_s=0.05) is False
    assert gate.in_flight == 1 and gate.holding


async def test_fail_refuses_every_held_request_and_ends_holding() -> None:
    gate = Gate(UP, hold_s=60)
    await gate.hold(drain_s=0)
    tasks = [asyncio.create_task(gate.admit()) for _ in range(3)]
    await wait_until_async(lambda: gate.held == 3, deadline_s=PROCESS_S, what="three requests held")
    assert gate.fail("the new server exited") == 3
    for task in tasks:
        with pytest.raises(Refusal) as refused:
            await task
        assert refused.value.status == 503 and refused.value.retry_after_s == 30
        assert refused.value.body["error"]["message"].endswith("the new server exited")
    assert gate.holding is False and await gate.admit() == UP


async def test_a_request_held_past_the_hold_time_is_refused() -> None:
    gate = Gate(UP, hold_s=0.05)
    await gate.hold(drain_s=0)
    with pytest.raises(Refusal) as refused:
        await gate.admit()
    assert refused.value.body["error"]["message"].startswith(
        "vramtop's front door held this request for 0.05 s while vLLM restarted"
    )
    assert gate.held == 0 and gate.longest_hold_s >= 0.05


async def test_the_longest_hold_counts_the_requests_still_waiting() -> None:
    now = [100.0]
    gate = Gate(None, hold_s=600, clock=lambda: now[0])
    assert gate.holding  # no upstream: nothing to forward to yet
    task = asyncio.create_task(gate.admit())
    await wait_until_async(lambda: gate.held == 1, deadline_s=PROCESS_S, what="the request held")
    now[0] = 142.5
    assert gate.longest_hold_now() == 42.5
    with pytest.raises(ValueError):
        gate.release(None)
    gate.release(UP)
    assert await task == UP and gate.longest_hold_s == 42.5


async def test_the_first_request_served_after_a_release_is_timed_from_it() -> None:
    now = [100.0]
    gate = Gate(UP, hold_s=60, clock=lambda: now[0])
    assert gate.first_served_s is None
    await gate.admit()
    gate.finished(ok=True)  # served before any release
    assert gate.first_served_s is None
    gate.start_holding()
    now[0] = 130.0
    gate.release(None)
    await gate.admit()
    now[0] = 131.0
    gate.finished(ok=False)  # cut: not served
    await gate.admit()
    now[0] = 134.5
    gate.finished(ok=True)
    now[0] = 140.0
    await gate.admit()
    gate.finished(ok=True)
    assert gate.first_served_s == 4.5  # the first answered whole, 4.5 s after the release
    gate.release(None)  # the next step's release starts over
    assert gate.first_served_s is None
