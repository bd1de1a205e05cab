"""The front door's process, beside its server: opened with a launch (kept when it runs at the
profile's address, else started), stopped with the server or when the profile no longer asks
for one, and started again when it died.

`DoorProcess` only starts and stops the door; what the door is asked to do with its requests
(hold, release, fail) is `DoorControl`'s (door_steps.py), the one place that asks it.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TypedDict

import psutil

from vramtop.config import parse_door_address
from vramtop.outcomes import ActionResult
from vramtop.supervisor import door, launch, state
from vramtop.supervisor.handle import ServerHandle
from vramtop.supervisor.state import Lifecycle, ServerRecord

log = logging.getLogger(__name__)


class DoorFields(TypedDict, total=False):
    """The door's fields of a launch's record (`ServerRecord`), as `open_for_launch` finds
    or starts the door (all of them; none for a launch without a door)."""

    front_door: str
    door_pid: int | None
    door_create_time: float | None
    door_restarts: int
    internal_port: int


def strays_said(pids: list[int]) -> str:
    """`stop`'s words for the stray doors it ended (glossary: stray door)."""
    which = f"pid {pids[0]}" if len(pids) == 1 else "pids " + ", ".join(map(str, pids))
    doors = "a front door" if len(pids) == 1 else f"{len(pids)} front doors"
    return f"ended {doors} left by an interrupted start ({which})"


class DoorProcess:
    """The front door's process for one server (its `ServerHandle`): started, kept, stopped
    and started again, each recorded in the server's record."""

    def __init__(self, server: ServerHandle) -> None:
        self._server = server

    def internal_port(self) -> int | None:
        """With a front door, the loopback port the next launch's vLLM listens on (kept, or a
        new one when something else holds it now); None without a door."""
        address = self._server.profile.front_door
        if address is None:
            return None
        return door.internal_port_for_launch(self._server.name, parse_door_address(address)[1])

    def open_for_launch(
        self, prev: ServerRecord | None, internal: int
    ) -> DoorFields | ActionResult:
        """Under the lock, before a launch: the profile's door running (the previous record's,
        when it still runs at the same address; else started, holding from its start). The
        door's fields for the new record, or why nothing can be started."""
        profile = self._server.profile
        address = profile.front_door
        assert address is not None
        restarts = prev.door_restarts if prev is not None else 0
        if prev is not None and prev.front_door == address and door.alive(prev):
            pid, made = prev.door_pid, prev.door_create_time
        else:
            if prev is not None and prev.front_door == address and prev.door_pid is not None:
                restarts += 1  # it died, and housekeeping had not started it again yet
                log.warning("front door of %s had died; starting it again", prev.profile)
            if prev is not None and door.alive(prev):
                door.stop(prev)  # the profile's door moved: the old address is closed
            self.end_strays(None)  # else one holds the port asked for
            host, port = parse_door_address(address)
            owner = launch.port_owner(host, port, self._server.options_of)
            if owner is not None:
                return ActionResult(
                    False,
                    f"the front door's port {port} is already in use by {owner}; "
                    "nothing was started",
                    "stop that program, or give the profile another front_door",
                )
            # Holding from its start: the server behind it is about to load (released once ready).
            spawned = door.spawn(
                self._server.name, address, None, profile.front_door_hold_s, profile.env
            )
            if isinstance(spawned, str):
                return ActionResult(False, f"{spawned}; nothing was started")
            pid, made = spawned
        facts: DoorFields = {
            "front_door": address,
            "door_pid": pid,
            "door_create_time": made,
            "door_restarts": restarts,
            "internal_port": internal,
        }
        return facts

    def close_opened(self, prev: ServerRecord | None, facts: DoorFields) -> None:
        """A launch that could not go on after `open_for_launch` (its state file or its log
        could not be written: a full disk; or Ctrl+C before the record was saved): the door
        it started is stopped again, since no record would name it and it would hold its
        port, and what it holds, for nobody. The previous record's door stays: that record
        still names it."""
        pid = facts.get("door_pid")
        if pid is None or (prev is not None and prev.door_pid == pid):
            return
        door.stop(ServerRecord(profile=self._server.name, **facts))

    def close_unwanted(self, prev: ServerRecord | None) -> None:
        """A launch without a front door: a door the previous run had is stopped (the profile
        no longer asks for one)."""
        if prev is not None and prev.door_pid is not None and door.alive(prev):
            door.stop(prev)

    def stop(self) -> list[int]:
        """`vramtop stop`: the door stops first (it lets its requests in flight finish while
        the server still serves them), and the record forgets it. A door no record names
        (its start was interrupted or killed) is ended too: the pids of those ended."""
        rec = self._server.record()
        ended = self.end_strays(rec.door_pid if rec is not None else None)
        if rec is None or rec.door_pid is None:
            return ended
        door.stop(rec)
        rec.door_pid = rec.door_create_time = None
        state.save(rec)
        return ended

    def end_strays(self, named: int | None) -> list[int]:
        """Under the lock: the profile's `door.strays` ended, as `door.stop` ends a door; the
        pids of those ended."""
        ended = []
        for proc in door.strays(self._server.name, named):
            with contextlib.suppress(psutil.Error):
                made = proc.create_time()
                door.stop(
                    ServerRecord(
                        profile=self._server.name, door_pid=proc.pid, door_create_time=made
                    )
                )
                ended.append(proc.pid)
                log.warning(
                    "front door of %s left by an interrupted start (pid %d): ended",
                    self._server.name,
                    proc.pid,
                )
        return ended

    def restart_dead(self) -> bool:
        """Under the lock: the record's door, found dead, started again at its address with the
        server behind it as upstream (holding, while that server still loads); True when it was."""
        rec = self._server.record()
        if rec is None or rec.door_pid is None or rec.front_door is None or door.alive(rec):
            return False
        if rec.internal_port is None:
            return False
        # The server behind it does not serve yet: the new door holds from its start.
        loading = rec.state in (Lifecycle.LAUNCHING, Lifecycle.STARTING) or (
            rec.state == Lifecycle.CRASHED and rec.next_restart_at is not None
        )
        spawned = door.spawn(
            self._server.name,
            rec.front_door,
            None if loading else rec.internal_port,
            self._server.profile.front_door_hold_s,
            self._server.profile.env,
        )
        if isinstance(spawned, str):
            log.warning(
                "front door of %s died and could not be started again: %s", rec.profile, spawned
            )
            return False
        rec.door_pid, rec.door_create_time = spawned
        rec.door_restarts += 1
        state.save(rec)
        log.warning("front door of %s died; started again (pid %d)", rec.profile, spawned[0])
        return True

    def restart_dead_unlocked(self) -> None:
        """Housekeeping's step for a door that died (killed, crashed): `restart_dead` under the
        lock, when it is free (an action under way starts the door itself when it needs it)."""
        try:
            with state.locked(self._server.name, timeout_s=0.2):
                self.restart_dead()
        except state.Busy:
            pass
