"""The demo's simulated machine for headless commands: a world daemon that outlives them.

`vramtop start --demo` and `vramtop stop --demo` run as separate processes, so the simulated
GPU cannot belong to either: it runs detached (its own session) under the demo directory and
each command finds it again by its socket.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vramtop import files, locations
from vramtop.ports import free_port
from vramtop.sim.card import CARDS, DEFAULT_CARD
from vramtop.sim.machine import SimMachine, sweep_sim_processes
from vramtop.sim.world_protocol import SOCKET_ENV, SPEED_ENV, STARTUP_ENV, WorldUnreachable

if TYPE_CHECKING:
    # pydantic, loaded where the profile is made: the world daemon is started before it.
    from vramtop.config import Profile

DEMO_PROFILE = "demo"
# Which scenario the demo's desktop plays (vramtop/sim/scenarios/): `manual` waits for the
# `v` key; `field_report` replays the field report's two calls.
SCENARIO_ENV = "VRAMTOP_SIM_SCENARIO"
_PORT_FILE = "server-port"
# The demo's simulated GPU leaves by itself once no server and no console have used it for
# this long (`stop --demo` stops the server; the GPU needs no stop of its own).
IDLE_EXIT_S = 45.0


def _speed() -> float:
    try:
        return float(os.environ.get(SPEED_ENV, "1"))
    except ValueError:
        return 1.0


def _startup_s() -> float | None:
    try:
        value = os.environ.get(STARTUP_ENV)
        return float(value) if value else None
    except ValueError:
        return None


def demo_home(card: str = DEFAULT_CARD) -> Path:
    """Where one simulated machine lives: the 5090 in the demo directory, each other card in
    a directory of its own (its own world, server, port and state)."""
    home = locations.demo_dir()
    # Its world's socket and port are found there: no other user may write in it.
    return locations.own_dir(home if card == DEFAULT_CARD else home / card)


def demo_profile_name(card: str = DEFAULT_CARD) -> str:
    return DEMO_PROFILE if card == DEFAULT_CARD else f"{DEMO_PROFILE}-{card}"


def demo_options(card: str, *, wsl: bool = False) -> str:
    """How a command line names the simulated machine `card`, whatever else runs when it is
    pasted: `--demo --wsl` (the 5090 the WSL2 way), else `--demo --card CARD`, also for the
    default card (a bare `--demo` is refused while two simulated servers run)."""
    if wsl and card == DEFAULT_CARD:
        return "--demo --wsl"
    return f"--demo --card {card}"


def demo_profile_options(profile: str | None, *, wsl: bool = False) -> str:
    """`demo_options` for the card of the demo profile `profile`; the default card's where
    it names none (no profile known yet)."""
    return demo_options(card_of_profile(profile or "") or DEFAULT_CARD, wsl=wsl)


def profile_options(profile: str, *, wsl: bool = False) -> str:
    """How a command line names the server of `profile`: a demo profile's machine in the
    demo's own words (`--demo --card spark`, see `demo_options`), else `--profile NAME`."""
    from vramtop.supervisor.attaching import profile_option

    card = card_of_profile(profile)
    return demo_options(card, wsl=wsl) if card is not None else profile_option(profile)


def card_of_profile(name: str) -> str | None:
    """The card whose demo profile `name` is (`demo-spark`: spark); None for another name."""
    return next((card for card in CARDS if demo_profile_name(card) == name), None)


def server_alive(profile: str) -> bool:
    """Whether the demo profile's record names a server or a front door that runs now."""
    from vramtop.supervisor import door, state, tree

    rec = state.load(profile)
    if rec is None:
        return False
    running = rec.state in state.ALIVE and tree.process_alive(rec.pid, rec.create_time)
    return running or door.alive(rec)


def running_cards() -> list[str]:
    """The cards whose simulated server (or its front door) runs now, in CARDS' order."""
    home = locations.demo_dir()
    return [
        card
        for card in CARDS
        # No directory, no port, no server: the record is not read.
        if (home if card == DEFAULT_CARD else home / card).is_dir()
        and server_alive(demo_profile_name(card))
    ]


def demo_machine(wsl: bool = False, card: str = DEFAULT_CARD) -> SimMachine:
    """The handle (not started) for the demo world of `card` (see sim/card.py's CARDS)."""
    return SimMachine(
        demo_home(card),
        wsl=wsl,
        scenario=os.environ.get(SCENARIO_ENV, CARDS[card].scenario),
        speed=_speed(),
        startup_s=_startup_s(),
        card=card,
        idle_exit_s=IDLE_EXIT_S,
    )


def world_alive(machine: SimMachine) -> bool:
    return _ping(machine) is not None


def _ping(machine: SimMachine) -> dict[str, object] | None:
    """The running world's answer to a ping (its speed, its scenario); None: none answers."""
    try:
        answer = machine.client.request("ping")
    except WorldUnreachable:
        return None
    return answer if answer.get("ok") else None


def unlike_asked(machine: SimMachine, running: dict[str, object]) -> str | None:
    """Where the world already running is not the one this environment asks for
    (VRAMTOP_SIM_SCENARIO, VRAMTOP_SIM_SPEED set to another scenario or speed than it plays):
    one line saying what runs and how to get the asked-for one; None where nothing was asked
    or it is the same. A world is not changed under its server: it is used as it is."""
    from vramtop.sim import scenario

    differ: list[str] = []
    asked_scenario = os.environ.get(SCENARIO_ENV)
    if asked_scenario and running.get("scenario") is not None:
        try:
            asked_name = scenario.load(asked_scenario).name
        except ValueError:
            asked_name = asked_scenario
        if asked_name != running["scenario"]:
            differ.append(f"{SCENARIO_ENV}={asked_scenario}")
    speed = running.get("speed")
    asked_speed = os.environ.get(SPEED_ENV)
    if asked_speed and isinstance(speed, int | float) and abs(_speed() - speed) > 1e-9 * speed:
        differ.append(f"{SPEED_ENV}={asked_speed}")
    if not differ:
        return None
    card = machine.card.key
    pace = f"{speed:g}" if isinstance(speed, int | float) else "unknown"
    return (
        f"the simulated {card} machine already runs (scenario {running.get('scenario')}, "
        f"speed {pace}) and is used as it is: {' '.join(differ)} not applied; "
        f"`vramtop stop {demo_options(card)} --all` stops it, then run this again to start the "
        "asked-for one"
    )


def nothing_left(machine: SimMachine, profile: str = DEMO_PROFILE) -> bool:
    """Whether the demo has nothing running to look after: its world does not answer, and no
    front door of its profile runs, named by its record or a stray one. A door outlives the
    world (a relaunch killed during its start leaves it holding, the world idles out):
    housekeeping, which starts the world again, must then answer what the door holds rather
    than leave it to the hold's limit; `stop` ends a stray and `status` names it."""
    if world_alive(machine):
        return False
    from vramtop.supervisor import door, state

    rec = state.load(profile)
    if rec is not None and door.alive(rec):
        return False
    return not door.strays(profile, rec.door_pid if rec is not None else None)


@dataclass(frozen=True)
class BegunWorld:
    """The demo world as `begin_demo_world` left it: its handle, and whether it was
    running already (otherwise its daemon is starting)."""

    machine: SimMachine
    was_running: bool
    # Where the one running is not the one asked for (`unlike_asked`): the line to say.
    unlike_asked: str | None = None


def begin_demo_world(wsl: bool = False, card: str = DEFAULT_CARD) -> BegunWorld:
    """The demo world's daemon started, detached, if its socket does not answer; not waited
    for (`finish_demo_world` waits), so that the rest of a command loads meanwhile."""
    machine = demo_machine(wsl, card)
    running = _ping(machine)
    if running is not None:
        unlike = unlike_asked(machine, running)
        # This command plays what runs: a server or agent it launches, and its own clock
        # (the guard's), keep the world's pace.
        speed = running.get("speed")
        if isinstance(speed, int | float) and speed > 0 and speed != machine.speed:
            machine.speed = float(speed)
            os.environ[SPEED_ENV] = f"{float(speed):g}"
        if isinstance(running.get("scenario"), str):
            machine.scenario = str(running["scenario"])
        return BegunWorld(machine, was_running=True, unlike_asked=unlike)
    machine.spawn()
    return BegunWorld(machine, was_running=False)


def abandon_demo_world(begun: BegunWorld) -> None:
    """Stop the world `begin_demo_world` started, when the command that started it goes no
    further (Ctrl+C while it loads the rest); one that was running already is left alone."""
    if begun.was_running:
        return
    proc = begun.machine.world_proc
    if proc is None:
        stop_demo_world(begun.machine.card.key)
        return
    # Not waited for yet: it may not answer on its socket yet.
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    begun.machine.world_proc = None


def finish_demo_world(machine: SimMachine) -> SimMachine:
    """The world `begin_demo_world` started, once it answers. RuntimeError when it cannot be
    started (the caller turns that into a message)."""
    if machine.world_proc is not None:
        machine.wait_started()
        # Forget the handle's process: the daemon lives on after this command exits (it runs
        # in its own session) and is stopped through its socket.
        machine.world_proc = None
    return machine


def stop_demo_world(card: str = DEFAULT_CARD) -> bool:
    """Stop the demo world and any simulated process left on it; False if none was running."""
    machine = demo_machine(card=card)
    if not world_alive(machine):
        return False
    sweep_sim_processes(machine.socket_path)  # a sweep for strays; servers are stopped before this
    with contextlib.suppress(WorldUnreachable):
        machine.client.request("shutdown")
    return True


def demo_port(home: Path | None = None) -> int:
    """The demo server's port: chosen free once, then kept (so a restart reuses it)."""
    path = (home or locations.demo_dir()) / _PORT_FILE
    try:
        return int(locations.read_own(path, limit=64).strip())
    except files.NotYours:
        raise
    except (OSError, ValueError):
        pass  # not chosen yet, or damaged: chosen again
    port = free_port()
    files.write_atomic(path, f"{port}\n".encode())
    return port


# `demo_profile`'s front door by default: on the demo's port, the simulated vLLM behind it.
DEMO_DOOR = "default"


def door_available() -> bool:
    """Whether this installation can run the front door (its package and aiohttp): a demo
    without it runs its server on the demo port directly, as before."""
    import importlib.util

    try:
        return all(importlib.util.find_spec(m) for m in ("aiohttp", "vramtop.frontdoor"))
    except (ImportError, ValueError):
        return False


def demo_door(given: str | None, card: str = DEFAULT_CARD) -> str | None:
    """`--front-door` as `demo_profile` takes it: `off`, none; not given, the door the
    card's running server was started with (its record names it: a restart, a relaunch or
    a console keeps a door given at its start), else the default door."""
    if given is not None:
        return None if given == "off" else given
    profile = demo_profile_name(card)
    if server_alive(profile):
        from vramtop.supervisor import state

        rec = state.load(profile)
        if rec is not None:
            return rec.front_door
    return DEMO_DOOR


def demo_profile(machine: SimMachine, front_door: str | None = DEMO_DOOR) -> Profile:
    """The field report's server on the simulated card. By default behind vramtop's front
    door on the demo's port (the agent's address; the simulated vLLM listens on a loopback
    port of vramtop's choosing), so that a restart or relaunch costs the agent nothing;
    `front_door`: another address for the door, or None for no door."""
    from vramtop.config import Profile

    port = demo_port(machine.home)
    if front_door == DEMO_DOOR:
        front_door = f"127.0.0.1:{port}" if door_available() else None
    full_env = machine.server_env()
    env = {
        key: full_env[key]
        for key in (SOCKET_ENV, SPEED_ENV, STARTUP_ENV, "PYTHONUNBUFFERED")
        if key in full_env
    }
    return Profile(
        name=demo_profile_name(machine.card.key),
        argv=machine.server_argv(port=port),
        env=env,
        host="127.0.0.1",
        port=port,
        stop_timeout_s=5.0,
        front_door=front_door,
        # The demo's agent asks for up to 256 tokens: a restart's drain is seconds.
        drain_s=30.0,
    )


def memory_released_check(machine: SimMachine) -> Callable[[frozenset[int]], bool]:
    """True once the simulated GPU holds nothing for the stopped tree's pids."""

    def released(pids: frozenset[int]) -> bool:
        try:
            state = machine.client.request("state")
        except WorldUnreachable:
            return True  # no world, no memory held
        held = {int(s["pid"]) for s in state.get("servers", [])}
        return not (held & set(pids))

    return released
