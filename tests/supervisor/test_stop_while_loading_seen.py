"""A stop asked for while the server loads, seen by a console in another process, is a stop.

The field case: a console watches vLLM load (the CPU build takes minutes), and `vramtop stop`
runs in another shell. vLLM, busy loading, takes seconds to go after SIGTERM, so the console
sees the record go starting -> stopping -> stopped. The stop must reach its diagnosis as a
stop, never as "vLLM is down: the server exited ... without being asked to".

Real processes on the simulated machine: the server (a load far longer than the test), the
stop in a `python` process of its own, and here the console's part (housekeeping, the
state read each tick, the live session's lifecycle and diagnosis). The server is paused
(SIGSTOP) before the stop, as a loading vLLM that does not act on SIGTERM at once: the stop
then lasts its timeout, and the console sees it under way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sim_helpers import sim_profile

from tests.support.waiting import PROCESS_S, wait_until
from vramtop.core.findings import Kind
from vramtop.core.model import GpuReading, Sample, ServerState
from vramtop.session.live import LiveSession
from vramtop.sim.machine import SimMachine
from vramtop.supervisor import Supervisor, state

pytestmark = pytest.mark.slow

# Far longer than the test: the server is still loading when the stop comes.
LOAD_S = 600.0

STOP = """
import json, sys
from vramtop.config import Profile
from vramtop.supervisor import Supervisor
print(Supervisor(Profile(**json.loads(sys.argv[1]))).stop().message)
"""


@pytest.fixture
def machine(home: Path) -> Iterator[SimMachine]:
    with SimMachine(home / "sim", speed=20.0, startup_s=LOAD_S) as sim:
        yield sim


def test_a_stop_from_another_process_while_loading_is_never_a_crash(
    machine: SimMachine,
) -> None:
    profile = sim_profile(machine, "loading")
    started = Supervisor(profile).start(wait_ready=False)
    assert started.ok, started.message
    loading = wait_until(
        lambda: (r := state.load("loading")) is not None and r.state == "starting" and r,
        deadline_s=PROCESS_S,
        what=lambda: f"the server loading: {state.load('loading')}",
    )
    assert loading.pid is not None
    os.kill(loading.pid, signal.SIGSTOP)  # busy loading: SIGTERM is not acted on at once

    console = Supervisor(profile)  # the console's own, in this process
    session = LiveSession()
    seen: list[ServerState] = []

    def tick() -> ServerState:
        info = console.housekeeping()
        session.observe(Sample(t=float(len(seen)), gpu=GpuReading(source="sim"), info=info))
        seen.append(info.state)
        return info.state

    asked = {k: getattr(profile, k) for k in ("name", "argv", "env", "port", "stop_timeout_s")}
    stop = subprocess.Popen(
        [sys.executable, "-c", STOP, json.dumps(asked)],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ,
    )
    try:
        wait_until(
            lambda: tick() is ServerState.STOPPED and stop.poll() is not None,
            deadline_s=60,
            what=lambda: f"the stop done and seen; states seen: {sorted(set(seen))}",
        )
    finally:
        if stop.poll() is None:
            stop.kill()
        said = stop.communicate()[0]
    assert said.strip() == "stopped", said
    assert ServerState.STOPPING in seen, "the console never saw the stop under way"
    kinds = [f.kind for f in session.all_findings()]
    assert Kind.SERVER_CRASHED not in kinds, session.events()
    assert "stop" in [e.name for e in session.events()]
