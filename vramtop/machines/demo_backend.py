"""`vramtop --demo`: the real product on the simulated machine.

The simulated GPU runs detached (so a server left running outlives the console, and a second
console re-attaches to both); the fake vLLM server is supervised exactly like a real one, from
the demo profile; a coding agent (the load generator) runs inside the console's process.
"""

from __future__ import annotations

from vramtop.core.model import ServerState
from vramtop.machines.demo_world import (
    demo_machine,
    demo_profile,
    ensure_demo_world,
    memory_released_check,
    stop_demo_world,
    world_alive,
)
from vramtop.machines.machine_backend import DemoHooks, MachineBackend
from vramtop.machines.sampler import Sampler
from vramtop.sim.card import DEFAULT_CARD
from vramtop.sim.windows_counters import SimWindowsSource
from vramtop.supervisor.service import Supervisor


def demo_backend(
    *,
    wsl: bool = False,
    start_server: bool = True,
    windows: bool = True,
    card: str = DEFAULT_CARD,
) -> tuple[MachineBackend, bool]:
    """The demo backend, and whether this call started the simulated machine itself.

    With `start_server` the fake server is marked to start (the console starts it in a worker
    and shows its progress; `--once` starts it and waits). RuntimeError: the simulated GPU
    could not be started (the message says why)."""
    world_was_running = world_alive(demo_machine(wsl, card))
    machine = ensure_demo_world(wsl=wsl, card=card)
    profile = demo_profile(machine)
    supervisor = Supervisor(profile, memory_released=memory_released_check(machine))
    probe = machine.probe()
    sampler = Sampler(
        probe=probe,
        url=profile.url,
        info=supervisor.status,
        log_path=lambda: supervisor.log_path,
        windows=SimWindowsSource(machine.socket_path) if wsl and windows else None,
    )
    settled = supervisor.housekeeping()
    server_was_running = settled.state in (ServerState.RUNNING, ServerState.STARTING)
    owned = not world_was_running and not server_was_running

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
        machine.stop_load()
        if stop_server:
            stop_demo_world(card)

    backend = MachineBackend(
        sampler=sampler,
        supervisor=supervisor,
        demo=DemoHooks(toggle_call=toggle_call, call_on=call_on, shutdown=shutdown),
        wsl=wsl,
    )
    backend.autostart = start_server and not server_was_running
    # A real agent's traffic: long contexts re-read every turn, one or two streams at once
    # (the demo server runs at most two, as the field report's --max-num-seqs 2).
    machine.start_load(profile.url, concurrency=2, agent=True)
    return backend, owned
