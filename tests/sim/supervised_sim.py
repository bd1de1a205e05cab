"""A profile's server on the simulated machine, supervised and sampled as the console does it:
what the tests of remedies on real processes share."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.support.ports import free_port
from vramtop.config import Profile
from vramtop.machines.demo_world import memory_released_check
from vramtop.machines.machine_backend import MachineBackend
from vramtop.sim.machine import SimMachine
from vramtop.supervisor.service import Supervisor

_SIM_ENV = ("VRAMTOP_SIM_SOCKET", "VRAMTOP_SIM_SPEED", "VRAMTOP_SIM_STARTUP_S")


@dataclass(frozen=True)
class Supervised:
    profile: Profile
    supervisor: Supervisor
    backend: MachineBackend


@contextmanager
def supervised(
    machine: SimMachine, name: str, speed: float | None = None, **flags: Any
) -> Iterator[Supervised]:
    """Start the server (`flags` as `server_argv` takes them: `util=0.93`, …) and sample it;
    `speed`: samples stamped in simulated seconds (the machine's speed), else real ones.
    Stopped and closed on leaving."""
    from vramtop.machines.sampler import Sampler

    port = free_port()
    env = machine.server_env()
    profile = Profile(
        name=name,
        argv=machine.server_argv(port=port, **flags),
        env={k: env[k] for k in _SIM_ENV if k in env},
        port=port,
        stop_timeout_s=5,
    )
    supervisor = Supervisor(profile, memory_released=memory_released_check(machine))
    assert supervisor.start().ok
    clock = (lambda: time.monotonic() * speed) if speed else time.monotonic
    sampler = Sampler(
        probe=machine.probe(),
        url=profile.url,
        info=supervisor.status,
        log_path=lambda: supervisor.log_path,
        clock=clock,
    )
    backend = MachineBackend(sampler=sampler, supervisor=supervisor)
    try:
        yield Supervised(profile, supervisor, backend)
    finally:
        supervisor.stop()
        sampler.close()
        backend.session.close()
