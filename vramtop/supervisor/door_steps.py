"""The front door's part in each action: opened with a launch, holding before a stop,
released once the new server serves, failed when it never does, and started again when it
died.

`DoorControl` is the one owner of the door's control for a server (its `ServerHandle`):
every step that asks the door to hold, release or fail its requests (an action, the load
follower at ready, housekeeping) asks it, and no other module calls the door's routes.
Each step runs under the profile's lock where it changes the record (the callers hold it);
none raises for the outside world.
"""

from __future__ import annotations

import logging
import os
from typing import TypedDict

from vramtop import files
from vramtop.config import parse_door_address
from vramtop.core.json_types import JsonObject
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.supervisor import door, launch, state, tree
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


class DoorControl:
    """The front door's control for one server: the door's steps of every action, and the
    only place its hold, release and fail are asked."""

    def __init__(self, server: ServerHandle) -> None:
        self._server = server
        # What the last hold before a stop did, for the step's timeline event (`held_facts`).
        self._held: JsonObject = {}

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
        when it still runs at the same address; else started), holding new requests until the
        server serves. The door's fields for the new record, or why nothing can be started."""
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
            host, port = parse_door_address(address)
            owner = launch.port_owner(host, port)
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
        # Requests that arrive while the server loads wait at the door instead of failing.
        door.hold(ServerRecord(profile=self._server.name, **facts), 0.0)
        return facts

    def close_opened(self, prev: ServerRecord | None, facts: DoorFields) -> None:
        """A launch that could not go on after `open_for_launch` (its state file or its log
        could not be written: a full disk): the door it started is stopped again, since no
        record would name it and it would hold its port, and what it holds, for nobody. The
        previous record's door stays: that record still names it."""
        pid = facts.get("door_pid")
        if pid is None or (prev is not None and prev.door_pid == pid):
            return
        door.stop(ServerRecord(profile=self._server.name, **facts))

    def close_unwanted(self, prev: ServerRecord | None) -> None:
        """A launch without a front door: a door the previous run had is stopped (the profile
        no longer asks for one)."""
        if prev is not None and prev.door_pid is not None and door.alive(prev):
            door.stop(prev)

    def hold_before_stop(self, progress: ProgressCallback) -> str | None:
        """Before a restart or relaunch stops the server: new requests are held at the door and
        those in flight are let finish (up to the profile's `drain_s`). Why the door cannot be
        asked (its token file is one vramtop may not use: `files.NotYours`), or None: then
        nothing was asked, and the caller stops nothing (held by nobody, the requests sent
        during the restart would fail)."""
        rec = self._server.record()
        if rec is None or rec.front_door is None or not door.alive(rec):
            return None
        try:
            door.current_token(rec.profile)
        except files.NotYours as exc:
            return f"the front door cannot be asked to hold requests: {exc.strerror}"
        drain_s = self._server.profile.drain_s
        progress("holding new requests at the front door")
        answer = door.hold(rec, drain_s) or {}
        self._held = {k: answer[k] for k in HOLD_FACTS if _is_count(answer.get(k))}
        replayed = self._held.get("replayed")
        if replayed:
            # (Short: the console's status line has ~65 columns for a step at 80.)
            progress(f"{replayed} unanswered request(s) will go to the new server")
        if not answer.get("drained", True):
            left = answer.get("in_flight")
            progress(f"{left} request(s) still running after {drain_s:g} s: stopping anyway")
        return None

    def held_facts(self) -> JsonObject:
        """What the last hold before a stop did, taken once for the step's timeline event:
        `replayed` (the requests cancelled upstream, sent again to the new server) and
        `drain_took_s` (how long the answers begun took to finish); empty without a hold."""
        facts, self._held = self._held, {}
        return facts

    def release_back(self) -> None:
        """A stop that failed (the old server still runs): what the door held goes to it."""
        rec = self._server.record()
        if rec is not None and rec.front_door is not None and door.alive(rec):
            door.release(rec)

    def release_at_ready(self, rec: ServerRecord) -> None:
        """The server of `rec` (saved as running) serves: what the door held while it loaded
        goes to it now."""
        if rec.front_door is not None:
            door.release(rec)

    def hold_for_restart(self, rec: ServerRecord) -> None:
        """A crash with an automatic restart to come (`rec` saved so): new requests wait at
        the door for it rather than fail."""
        if rec.next_restart_at is not None and rec.front_door is not None and door.alive(rec):
            door.hold(rec, 0.0)

    def fail_held(self, rec: ServerRecord, why: str) -> None:
        """Nobody will start the server of `rec` again (saved as stopped): what the door
        holds is answered now (503, `why`), not after the hold's limit."""
        if rec.front_door is not None and door.alive(rec):
            door.fail(rec, why)

    def after_action(self, result: ActionResult) -> None:
        """An action's outcome at the door: a server that serves was released to already (the
        load follower does that at ready); one that failed to start fails what is held at once
        (503, never a wait for the hold to time out). One still loading, or an action refused
        before anything stopped, leaves the door as it is."""
        if result.ok:
            return
        rec = self._server.record()
        if rec is None or rec.front_door is None or not door.alive(rec):
            return
        if rec.state in (Lifecycle.CRASHED, Lifecycle.STOPPED):
            door.fail(rec, result.message)

    def stop_door(self) -> None:
        """`vramtop stop`: the door stops first (it lets its requests in flight finish while
        the server still serves them), and the record forgets it."""
        rec = self._server.record()
        if rec is None or rec.door_pid is None:
            return
        door.stop(rec)
        rec.door_pid = rec.door_create_time = None
        state.save(rec)

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

    def release_stale_hold(self) -> None:
        """A front door left holding with no start under way (the vramtop that restarted or
        relaunched it was killed between its hold and its release, its lock free): in front of
        a server that serves, what it holds goes to the server; in front of one that crashed or
        stopped, with no automatic restart to come, it is answered at once (the door's 503,
        naming why, also said in `record_note`) rather than after the hold's limit. One
        loopback request, only where a door is. A server still loading keeps the hold: it is
        released at its ready."""
        rec = self._server.recorded()
        if rec is None or rec.front_door is None:
            return
        if rec.state not in (Lifecycle.RUNNING, Lifecycle.CRASHED, Lifecycle.STOPPED):
            return
        if self._restart_to_come(rec):
            return
        if not door.alive(rec):
            return
        seen = door.info(rec) or {}
        if not seen.get("holding"):
            return
        try:
            with state.locked(self._server.name, timeout_s=0.2):  # free: nobody acts now
                current = self._server.record()
                if current is None or self._restart_to_come(current):
                    return
                if current.state == Lifecycle.RUNNING:
                    log.warning("front door of %s was left holding: released", current.profile)
                    door.release(current)
                elif current.state in (Lifecycle.CRASHED, Lifecycle.STOPPED):
                    why = _nobody_starts(current)
                    if door.fail(current, why):
                        held = seen.get("held")
                        count = f"{held} request(s)" if isinstance(held, int) else "requests"
                        self._server.record_note = (
                            f"the front door held {count}: answered 503, {why}"
                        )
                        log.warning(
                            "front door of %s: %s", current.profile, self._server.record_note
                        )
        except state.Busy:
            pass  # an action under way holds it, and releases it itself

    def _restart_to_come(self, rec: ServerRecord) -> bool:
        """Whether something will start the server again, for which the door holds meanwhile:
        housekeeping's automatic restart of a crashed server, or the vramtop that launched it,
        still alive (a relaunch whose start failed rolls back to the previous flags)."""
        if rec.state != Lifecycle.CRASHED:
            return False
        if rec.next_restart_at is not None and self._server.profile.auto_restart:
            return True
        return rec.actor_pid is not None and (
            rec.actor_pid == os.getpid() or tree.process_alive(rec.actor_pid, rec.actor_create_time)
        )


# The hold answer's facts a step's event carries (the door's own words).
HOLD_FACTS = ("replayed", "drain_took_s")


def _is_count(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _nobody_starts(rec: ServerRecord) -> str:
    """Why nothing will serve what the door holds, in words."""
    word = "crashed" if rec.state == Lifecycle.CRASHED else "is stopped"
    cause = f" ({rec.last_error})" if rec.state == Lifecycle.CRASHED and rec.last_error else ""
    return f"no start is under way (its vramtop is gone) and vLLM {word}{cause}"
