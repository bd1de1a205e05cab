"""A step's last phase, the first request served after its release: the step's event is
written at ready without waiting for it, and an event of its own, tied to the step, follows
once the front door answers a request whole (real processes: the door, the simulated vLLM)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sim_helpers import sim_profile

from tests.support import http
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.core.server_events import Event
from vramtop.event_log import EventLog
from vramtop.machines.demo_world import memory_released_check
from vramtop.sim.machine import SimMachine
from vramtop.supervisor import Supervisor, step_phases


@pytest.fixture
def machine(home: Path) -> Iterator[SimMachine]:
    with SimMachine(home / "sim", speed=20.0, startup_s=0.5) as sim:
        yield sim


def _events(name: str, kind: str) -> list[Event]:
    return [e for e in EventLog.for_profile(name).read() if e.name == kind]


@pytest.mark.slow
def test_the_first_request_served_after_a_restart_is_written_tied_to_it(
    machine: SimMachine,
) -> None:
    base = sim_profile(machine, "served")
    profile = base.model_copy(update={"front_door": f"127.0.0.1:{base.port}"})
    sup = Supervisor(profile, memory_released=memory_released_check(machine))
    try:
        assert sup.start().ok
        assert sup.restart().ok
        # Written at ready: no request was served after the release yet.
        restart = _events("served", "restart")[-1]
        phases = restart.detail["phases"]
        assert isinstance(phases, dict) and "first_served_s" not in phases
        body = {"prompt": "hello", "max_tokens": 5}
        answer = http.post(f"{sup.agent_url}/v1/completions", json=body, timeout=60)
        assert answer.status_code == 200

        def tied() -> list[Event]:
            return [e for e in _events("served", "first_served") if e.detail["step_t"] == restart.t]

        wait_until(
            lambda: tied() != [], deadline_s=PROCESS_S, what="the restart's first_served event"
        )
        (served,) = tied()
        assert served.detail["step"] == "restart" and served.t >= restart.t
        seconds = served.detail["first_served_s"]
        assert isinstance(seconds, float) and seconds >= 0
        # The start before it was never served: the restart's look began, its own ended.
        assert not [e for e in _events("served", "first_served") if e.detail["step"] == "start"]
        # The last step carries it from the timeline, with no door report given.
        last = step_phases.recorded_last_step("served")
        assert last is not None and last["phases"]["first_served_s"] == seconds  # type: ignore[index]
    finally:
        assert sup.stop().ok
