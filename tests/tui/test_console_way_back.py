"""The way back after a call (Pilot, the fake machine's clock): once the server runs below the
profile's launch budget and the desktop has been back within what that budget leaves it for
the settle time, the status line offers the launch budget again, and b opens the budget
dialog at it; never at the launch budget, never while an adaptive guard steps up itself."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

from tests.support.console import make_app, open_budget_dialog, settle, status_line, ticks
from tests.support.fake_backend import MAX_MODEL_LEN, FakeBackend
from vramtop.core.adaptive_words import AdaptiveState
from vramtop.core.headroom.terms import HeadroomInputs
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.machines.interface import ProfileLaunch
from vramtop.tui.console_state import RESULT_SHOWN_S

SETTLE_S = 5.0
OFFER = "call over: b relaunches at 0.93"


LAUNCH = FlagChange(budget=0.93, max_model_len=MAX_MODEL_LEN)
DURING = FlagChange(budget=0.83, max_model_len=65_536)  # the call's relaunch


class LaunchedAt(FakeBackend):
    """The fake machine whose profile launches at 0.93; an adaptive guard's state or none."""

    def __init__(self, guard: AdaptiveState | None = None) -> None:
        super().__init__(util=0.93)
        self.guard = guard
        self.length = MAX_MODEL_LEN

    @property
    def profile_launch(self) -> ProfileLaunch | None:
        return ProfileLaunch(LAUNCH, SETTLE_S)  # the profile's

    def relaunch(self, order: RelaunchOrder, progress: Any = None) -> Any:
        if order.change.max_model_len is not None:
            self.length = order.change.max_model_len
        return super().relaunch(order, progress)

    def headroom_inputs(self) -> HeadroomInputs | None:
        inputs = super().headroom_inputs()
        return None if inputs is None else replace(inputs, max_model_len=self.length)

    def adaptive_state(self) -> AdaptiveState | None:
        return self.guard


async def test_the_way_back_is_offered_once_the_desktop_has_settled() -> None:
    backend = LaunchedAt()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 2)
        backend.call_on = True  # a call: the desktop rises
        backend.relaunch(RelaunchOrder(DURING))  # relaunched to 0.83 for it
        await ticks(pilot, 3)
        assert OFFER not in status_line(app)
        backend.call_on = False  # the call ends
        await ticks(pilot, int(SETTLE_S) - 1)  # back for less than the settle time
        assert OFFER not in status_line(app), status_line(app)
        await ticks(pilot, 2)
        said = status_line(app)
        assert said.startswith(OFFER), said
        assert "KV tokens, --max-model-len 163,840)" in said and "(+" in said, said
        dialog = await open_budget_dialog(pilot)
        assert dialog.value_text == "0.93"
        await pilot.press("enter")  # the relaunch: the profile's flags as one FlagChange
        await settle(pilot)
        assert backend.changes[-1] == LAUNCH
        assert app.way_back_offer is None
        assert OFFER not in status_line(app)
        # Back at the launch budget: never offered again.
        await ticks(pilot, int(SETTLE_S) * 3)
        assert app.way_back_offer is None


async def test_the_offer_goes_when_a_call_comes_again() -> None:
    backend = LaunchedAt()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 2)
        backend.relaunch(RelaunchOrder(DURING))
        await ticks(pilot, int(SETTLE_S) + 1)
        assert status_line(app).startswith(OFFER), status_line(app)
        backend.call_on = True
        await ticks(pilot, 1)
        assert OFFER not in status_line(app)
        assert app.way_back_offer is None


async def test_no_offer_at_the_launch_budget() -> None:
    backend = LaunchedAt()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 2)
        backend.call_on = True
        await ticks(pilot, 2)
        backend.call_on = False
        await ticks(pilot, int(SETTLE_S) * 3)
        assert OFFER not in status_line(app), status_line(app)
        assert app.way_back_offer is None
        # Below it, the same console offers it.
        backend.relaunch(RelaunchOrder(DURING))
        await ticks(pilot, int(SETTLE_S) + 1)
        assert status_line(app).startswith(OFFER), status_line(app)


async def test_no_offer_while_an_adaptive_guard_steps_up_itself() -> None:
    backend = LaunchedAt(AdaptiveState(0.93, 0.83, 1.0, None))
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 2)
        backend.relaunch(RelaunchOrder(DURING))
        await ticks(pilot, int(SETTLE_S) * 3)
        assert OFFER not in status_line(app), status_line(app)
        assert app.way_back_offer is None
        # The guard left: the console offers it from then on.
        backend.guard = None
        await ticks(pilot, int(SETTLE_S) + 1)
        assert status_line(app).startswith(OFFER), status_line(app)


class RestartHeld(LaunchedAt):
    """Its restart waits for the test, which reads meanwhile (the offer is not made while an
    action runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()

    def restart(self, progress: Any = None, requests_lost: bool = False) -> Any:
        assert self.go.wait(timeout=30)
        return super().restart(progress, requests_lost)


@pytest.mark.parametrize("read_while_it_runs", [False, True])
async def test_a_restarts_outcome_is_read_before_the_offer_comes_back(
    read_while_it_runs: bool,
) -> None:
    # A reading shown while the restart ran: the offer, made again with the restart's
    # reading, replaced its "restarted" in the same frame. None: the offer, replaced by the
    # restart's words, was never said again while it still held.
    backend = RestartHeld()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 2)
        backend.relaunch(RelaunchOrder(DURING))
        await ticks(pilot, int(SETTLE_S) + 1)
        assert status_line(app).startswith(OFFER), status_line(app)
        await pilot.press("r", "r")  # a request runs: r asks first
        if read_while_it_runs:
            await ticks(pilot, 1)
        backend.go.set()
        await settle(pilot)
        assert status_line(app) == "restarted"
        assert app.way_back_offer is not None  # b still takes it
        await ticks(pilot, int(RESULT_SHOWN_S) + 1)  # once the outcome has been news
        assert status_line(app).startswith(OFFER), status_line(app)
