"""`vramtop --demo`: the real product on the simulated machine.

The simulated GPU runs detached (so a server left running outlives the console, and a second
console re-attaches to both); the fake vLLM server is supervised exactly like a real one, from
the demo profile; a coding agent (the load generator) runs as a process of its own.

In two steps: `begin_demo` brings up the simulated GPU and the demo profile's supervisor (what
a server's launch needs), `demo_backend` the backend over them (the sampler, the session and
its diagnosis). A one-shot answer launches the server between the two, so that it loads
while the rest does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from vramtop.core.model import ServerState
from vramtop.machines.demo_world import (
    DEMO_DOOR,
    BegunWorld,
    abandon_demo_world,
    begin_demo_world,
    demo_profile,
    finish_demo_world,
    memory_released_check,
    profile_options,
    stop_demo_world,
)
from vramtop.sim.card import DEFAULT_CARD

if TYPE_CHECKING:
    from vramtop.machines.machine_backend import MachineBackend
    from vramtop.sim.machine import SimMachine
    from vramtop.supervisor.service import Supervisor


def simulated_clock(speed: float) -> Callable[[], float]:
    """The samples' clock on the simulated machine: seconds of simulated time (real time ×
    its speed). Rates are then per simulated second, as the simulated vLLM's own figures
    are (its latencies, its stats line): at VRAMTOP_SIM_SPEED=4 the total and the
    per-request rates agree, where the total was per real second (4× the per-request)."""
    if speed <= 0 or speed == 1:
        return time.monotonic
    return lambda: time.monotonic() * speed


@dataclass(frozen=True)
class DemoStart:
    """The simulated machine before the backend over it: the world (answering), the demo
    profile's supervisor, and what was running before this command."""

    machine: SimMachine
    supervisor: Supervisor
    world_was_running: bool
    server_was_running: bool

    @property
    def owned(self) -> bool:
        """Whether this command started the simulated machine (then it stops it when done)."""
        return not self.world_was_running and not self.server_was_running

    def end(self, backend: MachineBackend | None = None) -> None:
        """Stop what this command started, once it is done or goes no further: the server it
        launched, the agent and the sampler (`backend`'s), and the simulated GPU if it started
        that too (one another command started leaves by itself once unused)."""
        if not self.server_was_running:
            self.supervisor.stop()
        if backend is not None:
            backend.close(stop_server=False)
        if not self.world_was_running:
            stop_demo_world(self.machine.card.key)


def begin_demo(
    *,
    wsl: bool = False,
    card: str = DEFAULT_CARD,
    begun: BegunWorld | None = None,
    front_door: str | None = DEMO_DOOR,
) -> DemoStart:
    """The simulated GPU started (or found) and the demo profile's supervisor, its record
    settled. `begun`: the world as `begin_demo_world(wsl, card)` began it. RuntimeError: the
    simulated GPU could not be started (the message says why)."""
    begun = begun or begin_demo_world(wsl, card)
    machine = begun.machine
    try:
        # The profile (pydantic) and the supervisor load while the world's daemon starts.
        profile = demo_profile(machine, front_door)
        from vramtop.supervisor.service import Supervisor

        supervisor = Supervisor(
            profile,
            memory_released=memory_released_check(machine),
            options_of=partial(profile_options, wsl=wsl),
        )
        finish_demo_world(machine)
        settled = supervisor.housekeeping()
    except BaseException:  # Ctrl+C too: a world this call started is not left behind
        abandon_demo_world(begun)
        raise
    running = settled.state in (ServerState.RUNNING, ServerState.STARTING)
    return DemoStart(machine, supervisor, begun.was_running, running)


def demo_backend(
    *,
    wsl: bool = False,
    start_server: bool = True,
    windows: bool = True,
    card: str = DEFAULT_CARD,
    begun: BegunWorld | None = None,
    start: DemoStart | None = None,
    agent: bool = True,
    front_door: str | None = DEMO_DOOR,
    clock: Callable[[], float] | None = None,
) -> tuple[MachineBackend, bool]:
    """The demo backend, and whether this call started the simulated machine itself.
    `clock`: the samples' clock (default: the simulated machine's, `simulated_clock`).

    With `start_server` the fake server is marked to start (the console starts it in a worker
    and shows its progress; `--once` starts it and waits). `begun`, `start`: the simulated
    machine as `begin_demo_world` or `begin_demo` brought it up (else this call does).
    `agent`: start the coding agent now (else the caller does, with `start_agent`).
    RuntimeError: the simulated GPU could not be started (the message says why)."""
    from vramtop.machines.live_machine import door_reader
    from vramtop.machines.machine_backend import DemoHooks, MachineBackend
    from vramtop.machines.sampler import Sampler
    from vramtop.sim.windows_side import SimWindowsSource

    start = start or begin_demo(wsl=wsl, card=card, begun=begun, front_door=front_door)
    machine, supervisor = start.machine, start.supervisor
    probe = machine.probe()
    sampler = Sampler(
        probe=probe,
        # vLLM's own address: behind a front door, the simulated vLLM's loopback port.
        url=supervisor.scrape_url,
        info=supervisor.status,
        log_path=lambda: supervisor.log_path,
        log_start=lambda: supervisor.log_offset,
        windows=SimWindowsSource(machine.socket_path) if wsl and windows else None,
        clock=clock or simulated_clock(machine.speed),
        door=door_reader(supervisor),  # the demo's door, where it runs behind one
    )

    def call_on() -> bool:
        # As of the tick's GPU read (an unreachable simulated GPU leaves the last answer; the
        # GPU panel says it is gone).
        return probe.call_on

    def toggle_call() -> bool:
        # WorldUnreachable goes up: the console says the call could not be changed, rather
        # than that it ended.
        on = not machine.call_on()
        machine.set_call(on)
        return on

    def shutdown(stop_server: bool) -> None:
        machine.agent.stop()
        if stop_server:
            stop_demo_world(card)

    backend = MachineBackend(
        sampler=sampler,
        supervisor=supervisor,
        demo=DemoHooks(toggle_call=toggle_call, call_on=call_on, shutdown=shutdown),
        wsl=wsl,
    )
    backend.autostart = start_server and not start.server_was_running
    if agent:
        start_agent(start)
    return backend, start.owned


def start_agent(start: DemoStart) -> None:
    """The coding agent on the demo server: a real agent's traffic, long contexts re-read
    every turn, one or two streams at once (the demo server runs at most two, as the field
    report's --max-num-seqs 2). A process of its own; it waits for the server."""
    # Through the front door when the demo has one: a restart then costs the agent nothing.
    machine = start.machine
    machine.agent.start(start.supervisor.agent_url, machine.server_env(), concurrency=2, agent=True)
