"""What the front door is asked to do with its requests in each action: hold while a launch
loads and before a stop, release once the new server serves, fail when it never does. The
door's process itself (started, stopped, started again when it died) is `DoorProcess`'s
(door_process.py).

`DoorControl` is the one owner of the door's control for a server (its `ServerHandle`):
every step that asks the door to hold, release or fail its requests (an action, the load
follower at ready, housekeeping) asks it, and no other module calls the door's routes.
Each step runs under the profile's lock where it changes the record (the callers hold it);
none raises for the outside world.
"""

from __future__ import annotations

import logging
import os

from vramtop import files
from vramtop.core.json_types import JsonObject
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.supervisor import door, state, tree
from vramtop.supervisor.door_process import DoorFields, DoorProcess
from vramtop.supervisor.handle import ServerHandle
from vramtop.supervisor.state import Lifecycle, ServerRecord

log = logging.getLogger(__name__)


class DoorControl:
    """The front door's control for one server: the door's steps of every action, and the
    only place its hold, release and fail are asked."""

    def __init__(self, server: ServerHandle, process: DoorProcess) -> None:
        self._server = server
        self._process = process  # the door's process itself: started, stopped

    def open_for_launch(
        self, prev: ServerRecord | None, internal: int
    ) -> DoorFields | ActionResult:
        """Under the lock, before a launch: the profile's door running (`DoorProcess`),
        holding new requests until the server serves. The door's fields for the new record,
        or why nothing can be started."""
        facts = self._process.open_for_launch(prev, internal)
        if isinstance(facts, ActionResult):
            return facts
        # Requests that arrive while the server loads wait at the door instead of failing.
        door.hold(ServerRecord(profile=self._server.name, **facts), 0.0)
        return facts

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
        self._server.step.mark("held")
        held: JsonObject = {k: answer[k] for k in HOLD_FACTS if _is_count(answer.get(k))}
        self._server.step.held(held)  # for the step's own timeline event
        replayed = held.get("replayed")
        if replayed:
            # (Short: the console's status line has ~65 columns for a step at 80.)
            progress(f"{replayed} unanswered request(s) will go to the new server")
        if not answer.get("drained", True):
            left = answer.get("in_flight")
            progress(f"{left} request(s) still running after {drain_s:g} s: stopping anyway")
        return None

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
HOLD_FACTS = ("replayed", "drain_took_s", "drained_requests")


def _is_count(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _nobody_starts(rec: ServerRecord) -> str:
    """Why nothing will serve what the door holds, in words."""
    word = "crashed" if rec.state == Lifecycle.CRASHED else "is stopped"
    cause = f" ({rec.last_error})" if rec.state == Lifecycle.CRASHED and rec.last_error else ""
    return f"no start is under way (its vramtop is gone) and vLLM {word}{cause}"
