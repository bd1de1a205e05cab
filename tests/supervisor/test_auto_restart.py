"""A profile with auto_restart: a crash is followed by a start after a growing delay, a limited
number of times; a stop asked for by a person is never undone."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from supervisor_helpers import fake_profile, ledger_empty

from tests.support.ports import free_port
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.core.model import ServerInfo, ServerState
from vramtop.core.server_events import Event
from vramtop.event_log import EventLog
from vramtop.supervisor import Supervisor, state, step_phases
from vramtop.supervisor.service import AUTO_RESTART_LIMIT


def auto_supervisor(name: str, ledger: Path, **env: str) -> Supervisor:
    """A profile with auto_restart; `env`: the fake server's (`FAKE_STARTUP_S`: its load)."""
    profile = fake_profile(name, free_port(), ledger, **env)
    profile = profile.model_copy(update={"auto_restart": True})
    return Supervisor(profile, memory_released=lambda: ledger_empty(ledger))


def poll_until(sup: Supervisor, wanted: ServerState, timeout_s: float) -> ServerInfo:
    """The first housekeeping step that finds `wanted`; at `timeout_s`, the last one (so that
    a test can also see a state that must not come within that time)."""
    infos = [sup.housekeeping()]

    def reached() -> bool:
        infos.append(sup.housekeeping())
        return infos[-1].state == wanted

    if infos[0].state != wanted:
        with contextlib.suppress(AssertionError):  # the caller asserts the state it saw
            wait_until(reached, deadline_s=timeout_s, what=wanted.value, poll_s=0.05)
    return infos[-1]


def crash(sup: Supervisor) -> tuple[float, float]:
    """SIGKILL the API server; this machine's clock read just before the kill and just after
    the crash was seen: the moment vramtop noticed it lies between the two."""
    killed_at = time.time()
    os.kill(sup.status().pid or 0, signal.SIGKILL)
    assert poll_until(sup, ServerState.CRASHED, PROCESS_S).state is ServerState.CRASHED
    return killed_at, time.time()


def noticed_at(restart_at: float | None, restarts: int) -> float:
    """When the crash was noticed, from the restart's time and its delay (2**restarts s)."""
    assert restart_at is not None
    return restart_at - 2.0**restarts


def test_a_crash_is_restarted_after_a_delay_that_grows(home: Path, ledger: Path) -> None:
    sup = auto_supervisor("auto", ledger)
    try:
        assert sup.start().ok
        first = sup.status().pid
        killed_at, seen_at = crash(sup)
        record = state.load("auto")
        assert record is not None
        restart_at = record.next_restart_at  # 2**0 s after the first crash was noticed
        assert killed_at <= noticed_at(restart_at, 0) <= seen_at
        assert restart_at is not None

        info = poll_until(sup, ServerState.RUNNING, PROCESS_S)
        assert info.state is ServerState.RUNNING and info.pid not in (None, first)
        # Not restarted before its time: the new launch began after it, on the same clock.
        assert info.started_at is not None and info.started_at >= restart_at
        record = state.load("auto")
        assert record is not None and record.restarts == 1

        killed_at, seen_at = crash(sup)
        record = state.load("auto")
        assert record is not None  # 2**1 s after the second
        assert killed_at <= noticed_at(record.next_restart_at, 1) <= seen_at
    finally:
        sup.stop()
    assert ledger_empty(ledger)


def test_restarts_stop_at_the_limit_and_a_person_starting_resets_them(
    home: Path, ledger: Path
) -> None:
    sup = auto_supervisor("limit", ledger)
    try:
        assert sup.start().ok
        record = state.load("limit")
        assert record is not None
        record.restarts = AUTO_RESTART_LIMIT  # as if it had crashed that often already
        state.save(record)
        crash(sup)
        record = state.load("limit")
        assert record is not None and record.next_restart_at is None
        assert poll_until(sup, ServerState.RUNNING, 1.5).state is ServerState.CRASHED

        assert sup.start().ok  # asked for by a person: the count starts again
        record = state.load("limit")
        assert record is not None and record.restarts == 0
    finally:
        sup.stop()


@pytest.mark.slow
def test_a_stop_asked_for_is_not_undone(home: Path, ledger: Path) -> None:
    sup = auto_supervisor("asked", ledger)
    assert sup.start().ok
    assert sup.stop().ok
    assert poll_until(sup, ServerState.RUNNING, 2.5).state is ServerState.STOPPED
    assert ledger_empty(ledger)


def test_an_automatic_restart_is_timed_in_its_event_as_a_restart_asked_for(
    home: Path, ledger: Path
) -> None:
    sup = auto_supervisor("timed", ledger)
    try:
        assert sup.start().ok
        crash(sup)
        assert poll_until(sup, ServerState.RUNNING, PROCESS_S).state is ServerState.RUNNING

        def restarts() -> list[Event]:
            return [e for e in EventLog.for_profile("timed").read() if e.name == "restart"]

        # Written by the thread that followed its load to ready, once it answered.
        wait_until(lambda: restarts() != [], deadline_s=PROCESS_S, what="the restart's event")
        (restart,) = restarts()
        assert restart.detail["asked_by"] == "auto_restart"
        assert restart.detail["result"] == "ok"
        phases = restart.detail["phases"]
        assert isinstance(phases, dict)
        assert {"launched_s", "ready_s", "total_s"} <= phases.keys()
        last = step_phases.recorded_last_step("timed")
        assert last is not None and last["action"] == "restart"
    finally:
        sup.stop()
    assert ledger_empty(ledger)


@pytest.mark.slow
def test_an_automatic_restart_is_said_under_way_until_its_load_is_done(
    home: Path, ledger: Path
) -> None:
    # `vramtop status` and a console's header, from any terminal, read the profile's step
    # lock: while the automatic restart's server loads (the record: starting), a restart.
    from vramtop.supervisor.under_way import action_under_way

    sup = auto_supervisor("said", ledger, FAKE_STARTUP_S="1.5")
    try:
        assert sup.start().ok
        crash(sup)
        assert action_under_way("said") is None  # crashed; its restart not due yet
        assert poll_until(sup, ServerState.STARTING, PROCESS_S).state is ServerState.STARTING
        acting = action_under_way("said")  # the load takes 1.5 s at least
        assert acting is not None and (acting.action, acting.pid) == ("restart", os.getpid())
        assert acting.asked_by == "auto_restart"  # said as automatic, not a person's
        assert poll_until(sup, ServerState.RUNNING, PROCESS_S).state is ServerState.RUNNING
        wait_until(
            lambda: action_under_way("said") is None, deadline_s=PROCESS_S, what="the restart's end"
        )
    finally:
        sup.stop()


@pytest.mark.slow
def test_a_restart_asked_for_while_an_automatic_one_loads_is_timed_as_its_own(
    home: Path, ledger: Path
) -> None:
    # The automatic restart's load is followed on a thread of its own; a person's restart
    # meanwhile (the action lock lets both act) replaces its server. Each event carries its
    # own step's phases: the automatic one stopped nothing, the person's took the whole way.
    sup = auto_supervisor("both", ledger, FAKE_STARTUP_S="1.5")
    try:
        assert sup.start().ok
        crash(sup)
        assert poll_until(sup, ServerState.STARTING, PROCESS_S).state is ServerState.STARTING
        assert sup.restart(asked_by="key").ok

        def restarts() -> dict[str, dict[str, object]]:
            events = EventLog.for_profile("both").read()
            return {str(e.detail["asked_by"]): e.detail for e in events if e.name == "restart"}

        wait_until(lambda: len(restarts()) == 2, deadline_s=PROCESS_S, what="both restarts' events")
        told = restarts()
        automatic, mine = told["auto_restart"]["phases"], told["key"]["phases"]
        assert isinstance(automatic, dict) and isinstance(mine, dict)
        assert {"stopped_s", "launched_s", "ready_s", "total_s"} <= mine.keys(), mine
        assert "launched_s" in automatic, automatic
        assert "stopped_s" not in automatic and "ready_s" not in automatic, automatic
    finally:
        sup.stop()
    assert ledger_empty(ledger)


# A vramtop (a console, a command) that runs the housekeeping step which restarts the crashed
# server, then dies while the new server loads (its terminal closed, kill -9).
DIES_DURING_THE_LOAD = """
import os, sys
from vramtop.config import Profile
from vramtop.supervisor import Supervisor
sup = Supervisor(Profile.model_validate_json(sys.argv[1]))
print(sup.housekeeping().state.value, flush=True)
os._exit(0)
"""


@pytest.mark.slow
def test_an_automatic_restart_whose_vramtop_died_is_told_as_served(
    home: Path, ledger: Path
) -> None:
    profile = fake_profile("cut", free_port(), ledger, FAKE_STARTUP_S="1.0")
    profile = profile.model_copy(update={"auto_restart": True})
    sup = Supervisor(profile, memory_released=lambda: ledger_empty(ledger))
    try:
        assert sup.start().ok
        crash(sup)
        record = state.load("cut")
        assert record is not None
        record.next_restart_at = time.time()  # due now
        state.save(record)
        died = subprocess.run(
            [sys.executable, "-c", DIES_DURING_THE_LOAD, profile.model_dump_json()],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert died.stdout.strip() == "starting", died.stderr
        # This vramtop settles the load nobody follows: ready without it.
        assert poll_until(sup, ServerState.RUNNING, PROCESS_S).state is ServerState.RUNNING
        (told,) = [e for e in EventLog.for_profile("cut").read() if e.name == "restart"]
        # Served: nobody waited on the vramtop that launched it (`vramtop status` runs
        # housekeeping and ends by design); it was said `interrupted` before.
        assert told.detail["result"] == "ok"
        assert told.detail["asked_by"] == "auto_restart"
        assert "vLLM became ready without it" in str(told.detail["message"])
    finally:
        sup.stop()
