"""The profile's launch flags, asked on every frame (the console's way back after a call),
are read from its command line once, not parsed again each second: on the demo that parse
was a tenth of the console's own work per frame. Another command line (a profile file
changed) is read for its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sim_helpers import sim_profile

from tests.support.calls import calls_into
from vramtop.core.vllm import args as vllm_args
from vramtop.machines.machine_backend import MachineBackend
from vramtop.machines.sampler import Sampler
from vramtop.sim.machine import SimMachine
from vramtop.supervisor import Supervisor


@pytest.fixture
def machine(home: Path) -> Iterator[SimMachine]:
    with SimMachine(home / "sim", speed=20.0, startup_s=0.2) as sim:
        yield sim


def backend_for(machine: SimMachine, budget: float) -> MachineBackend:
    sup = Supervisor(sim_profile(machine, f"flags{int(budget * 100)}", util=budget))
    sampler = Sampler(probe=machine.probe(), url=sup.profile.url, info=sup.status)
    return MachineBackend(sampler=sampler, supervisor=sup)


def frames(backend: MachineBackend, count: int) -> list[float | None]:
    """The budget the way back would offer to go back to, asked on `count` frames."""
    launches = [backend.profile_launch for _ in range(count)]
    flags = [launch.flags if launch is not None else None for launch in launches]
    return [f.budget if f is not None else None for f in flags]


def test_the_launch_flags_are_parsed_once_for_each_command_line(machine: SimMachine) -> None:
    first, other = backend_for(machine, 0.87), backend_for(machine, 0.81)
    try:
        shown, parses = calls_into(vllm_args.gpu_memory_utilization, lambda: frames(first, 5))
        assert shown == [0.87] * 5
        assert parses == 1
        # Another command line is its own: read, not taken from the first.
        shown, parses = calls_into(vllm_args.gpu_memory_utilization, lambda: frames(other, 3))
        assert shown == [0.81] * 3
        assert parses == 1
    finally:
        first.close(stop_server=False)
        other.close(stop_server=False)
