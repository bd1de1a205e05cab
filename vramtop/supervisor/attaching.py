"""Attach: adopt a vLLM server something else started, found by its port or its pid, and
record it as the profile's server."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from vramtop.config import Profile
from vramtop.outcomes import ActionResult
from vramtop.supervisor import (
    adoption,
    door,
    doors_found,
    handle,
    launch,
    state,
    state_moves,
    tree,
)
from vramtop.supervisor.handle import ServerHandle
from vramtop.supervisor.readiness import healthy_once, server_url
from vramtop.supervisor.state import Lifecycle

# Said of an attached server whose stdout and stderr are not files vramtop can read.
OUTPUT_ELSEWHERE = (
    "; its output goes elsewhere (a terminal or a pipe): vramtop cannot show it. "
    "Attach with --log PATH to name the file it writes to"
)

# How a command line names a profile's server: one rule, with the port's owner (launch).
ProfileOptions = launch.ProfileOptions
profile_option = launch.profile_option


def attach_locked(
    server: ServerHandle,
    port: int | None,
    pid: int | None,
    log: Path | None = None,
    options_of: ProfileOptions = profile_option,
) -> ActionResult:
    """Adopt the server found by `port` or `pid` (under the profile's lock). Given a front
    door of vramtop's (its port or its pid), the server behind it: said first. A server
    vramtop launched for another profile is refused, with the options that act on it
    (`options_of` its profile)."""
    door_pid = pid if pid is not None else launch.listening_pid(port or adoption.DEFAULT_PORT)
    front = doors_found.door_process(door_pid) if door_pid is not None else None
    if front is None:
        return _attach_found(server, port, pid, log, options_of, None)
    if pid is not None:
        said = f"pid {pid} is vramtop's front door (on {front.address}), not vLLM"
    else:
        named = f"port {port or adoption.DEFAULT_PORT}"
        said = f"{named} is vramtop's front door (pid {front.pid}, on {front.address}), not vLLM"
    if front.upstream_port is None:
        return ActionResult(
            False,
            f"{said}, and no vLLM server is behind it now (it holds requests until one "
            "serves): nothing was attached; start that server, or give --port or --pid of "
            "the vLLM server itself",
        )
    result = _attach_found(server, front.upstream_port, None, log, options_of, front)
    behind = f"{said}; the vLLM server behind it listens on port {front.upstream_port}"
    return replace(result, message=f"{behind}: {result.message}")


def _attach_found(
    server: ServerHandle,
    port: int | None,
    pid: int | None,
    log: Path | None,
    options_of: ProfileOptions,
    front: doors_found.FoundDoor | None,
) -> ActionResult:
    """`front`: the door it was found through (else the doors in front of it are looked
    for)."""
    found = adoption.find_server(port=port, pid=pid)
    if isinstance(found, str):
        return ActionResult(False, found)
    owner = tree.launched_for(found)
    if owner is not None and owner != server.name:
        return ActionResult(
            False,
            f"pid {found.pid} is the server vramtop launched for profile {owner}; "
            "nothing was attached",
            f"act on it with {options_of(owner)}",
        )
    rec = server.record()
    if rec is not None and server.alive(rec):
        if rec.pid == found.pid:
            return ActionResult(True, f"already attached to pid {found.pid}")
        return ActionResult(
            False,
            f"profile {server.name} already has a server (pid {rec.pid}); stop it first",
        )
    new = adoption.record_for(server.name, found, port)
    new.log_path = str(log) if log is not None else adoption.output_file(found.pid)
    if healthy_once(server_url(new.host, new.port)):  # else starting, as found
        state_moves.move(new, Lifecycle.RUNNING)
    fronts = [front] if front is not None else []
    if front is None and new.port is not None:
        fronts = doors_found.doors_in_front_of(new.port)
    fronted = _door_in_front(server.profile, new, fronts)
    handle.remember_tree(new)
    state.save(new)
    output = f"; its output: {new.log_path}" if new.log_path else OUTPUT_ELSEWHERE
    return ActionResult(True, f"attached to pid {found.pid} on port {new.port}{fronted}{output}")


def _door_in_front(
    profile: Profile, new: state.ServerRecord, fronts: list[doors_found.FoundDoor]
) -> str:
    """What attach says of the front door in front of the server adopted: this profile's
    (started with its token) is adopted too, into `new`, so that its restarts hold the door's
    requests, where the profile names it (`front_door`; a launch stops a door the profile does
    not name); another profile's stays that profile's (its token is not this one's), and is
    named with how this profile gets a door of its own. "": no door in front of it."""
    if not fronts:
        return ""
    front = fronts[0]
    where = f"the front door on {front.address} (pid {front.pid}) in front of it"
    name_it = f'give this profile front_door = "{front.address}"'
    if front.of_profile(profile.name):
        if not door.adopt_door(new, front.address, front.pid):
            return ""  # it ended since it was found: no door in front of it now
        if profile.front_door != front.address:  # its next start would stop it
            return f"; {where} is this profile's; to keep it past the next start, {name_it}"
        return f"; {where} is this profile's and is kept with it"
    owner = doors_found.profile_of_token_file(front.token_file)
    whose = f"profile {owner}'s" if owner is not None else "another profile's"
    # (not `vramtop stop` of its profile: that stops the server it names, maybe this one)
    return (
        f"; {where} is {whose} and stays so: requests sent to it reach this server, but this "
        f"profile's restarts do not hold them. To have them held, end that door (pid "
        f"{front.pid}) and {name_it}"
    )
