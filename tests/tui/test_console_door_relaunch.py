"""`b` during a call costs the agent nothing behind the demo's front door (Pilot, the real
simulated machine, its real door process, its agent sending through the door): a call makes
the memory collapse, `b` and Enter relaunch vLLM at the budget offered, and the door holds the
agent's requests meanwhile and forwards every one of them to the new server; none fails."""

from __future__ import annotations

import asyncio
import http.client
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.support import console
from tests.support.console import FAST, running_pid, toggle_call
from tests.support.http import get
from tests.support.waiting import PROCESS_S
from vramtop.core.budget import suggested_relaunch_flags
from vramtop.core.model import DoorReading
from vramtop.machines.demo_backend import demo_backend
from vramtop.machines.interface import Backend
from vramtop.sim.serving import BASE_TPS
from vramtop.tui.app import VramtopApp
from vramtop.tui.screens.budget_dialog import BudgetDialog

pytestmark = pytest.mark.usefixtures("sim_world")

SPEED = 5.0


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("aiohttp")  # the door's package: without it the demo has no door
    monkeypatch.setenv("VRAMTOP_SIM_SPEED", f"{SPEED:g}")  # the call collapses the pool sooner


@dataclass
class DoorSeen:
    """What the door said across the frames the console showed."""

    most_held: int = 0
    most_failed: int = 0

    def look(self, app: VramtopApp) -> DoorReading | None:
        door = app.sample.door if app.sample else None
        if door is not None:
            self.most_held = max(self.most_held, door.held)
            self.most_failed = max(self.most_failed, door.failed)
        return door


async def wait_for(
    pilot: Pilot[int], seen: DoorSeen, what: Callable[[], bool], timeout: float
) -> None:

    def looked() -> bool:
        seen.look(pilot.app)  # type: ignore[arg-type]
        return what()

    await console.wait_for(pilot, looked, timeout, about=lambda: seen)


def generating(app: VramtopApp) -> bool:
    rates = app.sample.rates if app.sample else None
    return bool(rates and rates.generation_tps and rates.generation_tps > 1)


# The test's own request, sent whole to the door before Enter, not streamed: the door has none
# of its answer before the simulated vLLM has generated all of it, which takes at least
# PROBE_TOKENS / (1.03 x BASE_TPS) simulated seconds (4.9 real ones at SPEED; longer still
# during the call's collapse), however loaded the machine. So the relaunch's hold, which
# follows Enter, finds it unanswered (cancelled upstream and sent again to the new server:
# replayed), or the door reads it once holding (held); the release, seconds later, comes
# after the door has read it. Either way the door holds a request, by construction rather
# than by the agent's timing. (It costs the new server as long again.)
PROBE_TOKENS = 2000
assert PROBE_TOKENS / (1.03 * BASE_TPS * SPEED) > 4


def send_probe(address: str) -> http.client.HTTPConnection:
    """The probe sent: once this returns, its bytes are with the door (loopback)."""
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    body = json.dumps({"prompt": "count the allocations " * 8, "max_tokens": PROBE_TOKENS})
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    return conn


def probe_answer(conn: http.client.HTTPConnection) -> tuple[int, dict[str, Any]]:
    try:
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        conn.close()


def door_report(address: str) -> dict[str, Any]:
    """The door's own counts since its start (`GET /vramtop/door`), read now: the requests it
    ever held, those a hold sent again; what the frames show is a sample of them."""
    report = get(f"http://{address}/vramtop/door", timeout=10).json()
    assert isinstance(report, dict), report
    return report


def door_of(app: VramtopApp) -> DoorReading:
    door = app.sample.door if app.sample else None
    assert door is not None, "the demo's door does not answer"
    return door


@pytest.mark.slow
async def test_b_during_a_call_behind_the_door_fails_no_request(
    closed_at_end: Callable[[Backend], None],
) -> None:
    backend, _ = demo_backend(wsl=False)
    closed_at_end(backend)
    app = VramtopApp(backend, FAST)
    seen = DoorSeen()
    async with app.run_test(size=(120, 40)) as pilot:

        def door() -> DoorReading | None:
            return app.sample.door if app.sample else None

        def served() -> int:
            reading = door()
            return reading.served if reading is not None else 0

        await wait_for(pilot, seen, lambda: running_pid(app) is not None and served() >= 1, 90)
        address = backend.front_door
        assert address is not None and door_of(app).address == address
        old_pid = running_pid(app)
        await wait_for(pilot, seen, lambda: backend.session.normal_rate() is not None, 120)
        await toggle_call(pilot)  # the call begins: the desktop takes the card's memory

        def offer() -> bool:  # the collapse banner offers a relaunch
            return suggested_relaunch_flags(app.shown.findings) is not None

        await wait_for(pilot, seen, offer, 180)
        offered = suggested_relaunch_flags(app.shown.findings)
        assert offered is not None

        await pilot.press("b")
        # (A door slow to answer on a busy machine is not read for a few ticks: wait for it.)
        await wait_for(
            pilot,
            seen,
            lambda: isinstance(app.screen, BudgetDialog) and door() is not None,
            PROCESS_S,
        )
        before = door_of(app)
        # From here on: the relaunch. (The door's count starts at its own start: a request the
        # agent sent in the instant between the door's start and its first hold can have
        # failed then, before any call; that is the start's to answer for, not `b`'s.)
        seen = DoorSeen(most_failed=before.failed)
        counted = await asyncio.to_thread(door_report, address)
        conn = send_probe(address)
        answered = asyncio.create_task(asyncio.to_thread(probe_answer, conn))
        await pilot.press("enter")  # the first offer needs no confirmation
        await wait_for(pilot, seen, lambda: running_pid(app) not in (None, old_pid), 240)
        assert any(e.name == "relaunch" for e in backend.session.events())

        # Those in flight at `b` finish (the drain), the new server serves what the door held,
        # and the agent goes on through the door.
        def all_served() -> bool:
            now = door()
            owed = before.served + before.in_flight + max(seen.most_held, 1)
            return (
                now is not None
                and not now.holding
                and now.held == 0
                and now.served >= owed
                and generating(app)
            )

        await wait_for(pilot, seen, all_served, 180)
        await wait_for(pilot, seen, answered.done, 300)
        status, answer = answered.result()
        # The probe was answered whole (all its tokens), by the new server.
        assert status == 200 and answer["usage"]["completion_tokens"] == PROBE_TOKENS, answer
        await wait_for(pilot, seen, lambda: door() is not None, PROCESS_S)  # (as at `b`)
        after = door_of(app)
        report = await asyncio.to_thread(door_report, address)
        # The same door throughout (its counts are its own since its start).
        assert not any(e.name == "door_restarted" for e in backend.session.events())
        # No request failed from `b` on; the agent's requests arrived while vLLM was down and
        # waited at the door, and every one of them was answered whole by the new server.
        assert seen.most_failed == before.failed == after.failed, (before, after)
        # Waited at the door: requests that came while vLLM was down (held), or those in
        # flight at Enter that the door cancelled and sent again to the new server (replayed),
        # the probe among them (PROBE_TOKENS), in the door's own counts, not the frames'.
        relaunch = [e for e in backend.session.events() if e.name == "relaunch"][-1]
        replayed = relaunch.detail.get("replayed")
        assert isinstance(replayed, int), relaunch.detail
        held = report["held_total"] - counted["held_total"]
        assert held >= 1 or replayed >= 1, (held, replayed, relaunch.detail)
        assert after.served - before.served >= before.in_flight + seen.most_held, (before, after)
        print(
            f"\nrelaunch at {offered[0]:.2f} behind the door: served {after.served - before.served}"
            f" since b, held {held}, replayed {replayed}, most held at once {seen.most_held},"
            " longest hold"
            f" {after.longest_hold_s:.1f} s, failed {after.failed - before.failed}"
        )
