"""The Supervisor: start, stop, restart, relaunch and adopt one profile's vLLM server, and
the housekeeping step that brings its record in line with what is really there.

The console and the headless commands both use it; it never raises for outside-world
failures (they come back as `ActionResult`s). Its parts, by concern, each an object it
holds: `handle` (the record as read, the process helpers), `following` (a load, to ready),
`actions` (what a person asks for) and here `housekeeping` (crash settling and automatic
restarts), which runs only when asked: the console runs it on a thread of its own, off the
tick that reads the sample (the tick only asks `settling` whether there is anything to
settle), and each command before it reports. `status()` only reads.

Reading the log and /health lives in `readiness`; ending the tree and waiting for the GPU to
give the memory back in `stopping`.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from vramtop.config import Profile
from vramtop.core.json_types import JsonObject
from vramtop.core.model import ServerInfo
from vramtop.core.remedy import FlagChange, RelaunchPrecheck
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.supervisor import causes, door, door_steps, handle, state, tree
from vramtop.supervisor.action_events import COMMAND, Launch, launch_of, write_action
from vramtop.supervisor.actions import LOST_REQUESTS_GRACE_S, ServerActions
from vramtop.supervisor.following import READY_TIMEOUT_S, LoadFollower
from vramtop.supervisor.handle import (
    MEMORY_RELEASE_TIMEOUT_S,
    ServerHandle,
    no_progress,
    own_create_time,
)
from vramtop.supervisor.readiness import healthy_once, server_url
from vramtop.supervisor.state import Lifecycle, ServerRecord
from vramtop.supervisor.stopping import MemoryReleased

__all__ = [
    "AUTO_RESTART_LIMIT",
    "LOST_REQUESTS_GRACE_S",
    "MEMORY_RELEASE_TIMEOUT_S",
    "READY_TIMEOUT_S",
    "MemoryReleased",
    "Supervisor",
    "server_url",
]

log = logging.getLogger(__name__)

AUTO_RESTART_LIMIT = 3


class Supervisor:
    """One profile's server: its actions, and the housekeeping step. Composed of the
    server's record and process (`ServerHandle`), the load follower and the actions over
    both; each part keeps its own state, set in its own `__init__`."""

    def __init__(
        self,
        profile: Profile,
        *,
        memory_released: MemoryReleased | None = None,
        health_timeout_s: float = 1.0,
    ) -> None:
        self._server = ServerHandle(
            profile, memory_released=memory_released, health_timeout_s=health_timeout_s
        )
        self._follower = LoadFollower(self._server)
        self._actions = ServerActions(self._server, self._follower)
        # The door restarts the record counted when this supervisor last told of them (from
        # its making: one started again at its first housekeeping step is told too).
        made = self._server.recorded()
        self._door_restarts_told = made.door_restarts if made is not None else 0

    # --- the server as recorded (the handle's) ------------------------------------------

    @property
    def profile(self) -> Profile:
        return self._server.profile

    @property
    def name(self) -> str:
        return self._server.name

    @property
    def log_path(self) -> Path | None:
        return self._server.log_path

    @property
    def log_offset(self) -> int:
        return self._server.log_offset

    @property
    def record_note(self) -> str | None:
        """What the last housekeeping step, start or stop found of a lost state file."""
        return self._server.record_note

    def record(self) -> ServerRecord | None:
        return self._server.record()

    @property
    def scrape_url(self) -> str:
        """Where vramtop itself reads the server (/metrics, /health): the profile's URL, or
        with a front door vLLM's own loopback port behind it, so that vramtop's reads are
        never held at the door nor counted among the agent's requests."""
        if self._server.profile.front_door is None:
            return self._server.profile.url
        rec = self._server.recorded()
        port = rec.internal_port if rec is not None else None
        return door.upstream_url(port or door.kept_internal_port(self._server.name))

    @property
    def agent_url(self) -> str:
        """Where the agent (a client) sends its requests: the front door, when the profile
        has one, else the server itself."""
        address = self._server.profile.front_door
        return self._server.profile.url if address is None else door.door_url(address)

    def door_restarts_since(self) -> int:
        """How many times the front door was started again after it died since the last
        ask, or since this supervisor was made (by any vramtop: the record counts them)."""
        rec = self._server.recorded()
        count = rec.door_restarts if rec is not None else 0
        told, self._door_restarts_told = self._door_restarts_told, count
        return max(0, count - told)

    def status(self) -> ServerInfo:
        return self._server.status()

    # --- what a person asks for (the actions') ------------------------------------------

    def start(
        self,
        progress: ProgressCallback | None = None,
        wait_ready: bool = True,
        timeout_s: float = READY_TIMEOUT_S,
        asked_by: str = COMMAND,
    ) -> ActionResult:
        """`asked_by` (here and in each action below): who asked, for the lasting timeline
        (`key`, `command`, `guard`)."""
        before = launch_of(self._server.recorded())
        result = self._actions.start(progress, wait_ready, timeout_s)
        return self._told("start", result, asked_by, before)

    def stop(
        self, progress: ProgressCallback | None = None, asked_by: str = COMMAND
    ) -> ActionResult:
        before = launch_of(self._server.recorded())
        return self._told("stop", self._actions.stop(progress), asked_by, before)

    def restart(
        self,
        progress: ProgressCallback | None = None,
        wait_ready: bool = True,
        timeout_s: float = READY_TIMEOUT_S,
        requests_lost: bool = False,
        asked_by: str = COMMAND,
    ) -> ActionResult:
        before = launch_of(self._server.recorded())
        result = self._actions.restart(progress, wait_ready, timeout_s, requests_lost)
        return self._told("restart", result, asked_by, before)

    def relaunch(
        self,
        change: FlagChange,
        save: bool = False,
        progress: ProgressCallback | None = None,
        wait_ready: bool = True,
        timeout_s: float = READY_TIMEOUT_S,
        precheck: RelaunchPrecheck | None = None,
        asked_by: str = COMMAND,
    ) -> ActionResult:
        before = launch_of(self._server.recorded())
        result = self._actions.relaunch(change, save, progress, wait_ready, timeout_s, precheck)
        return self._told("relaunch", result, asked_by, before, change.to_json())

    def _told(
        self,
        name: str,
        result: ActionResult,
        asked_by: str,
        before: Launch,
        detail: JsonObject | None = None,
    ) -> ActionResult:
        """`result`, once the action is written to the lasting timeline (when it changed
        anything: see `action_events`); a write that fails never changes the result."""
        try:
            after = launch_of(self._server.record())
            write_action(
                self.name,
                name,
                result,
                asked_by=asked_by,
                before=before,
                after=after,
                detail=detail,
            )
        except Exception:  # the action happened: a timeline that cannot say so is logged
            log.exception("writing the %s to the event log failed", name)
        return result

    def attach(
        self, port: int | None = None, pid: int | None = None, log: Path | None = None
    ) -> ActionResult:
        return self._actions.attach(port, pid, log)

    def wait_ready(
        self, progress: ProgressCallback | None = None, timeout_s: float = READY_TIMEOUT_S
    ) -> ActionResult:
        return self._actions.wait_ready(progress, timeout_s)

    # --- housekeeping -------------------------------------------------------------------

    def housekeeping(self) -> ServerInfo:
        """One step that settles the record against the live process tree and /health, then
        returns the server as it now is. Run by the console's housekeeping thread, by each
        command before it reports, and by anything else that reads the state for a person.

        - running/starting whose server is gone: crashed (exit code, last lines, cause),
          and, when the profile asks for it, an automatic restart once its delay has passed;
        - starting whose following vramtop is gone: running once /health answers;
        - launching/stopping whose vramtop died half-way (the lock is free): what is there
          (a found launch, stopped when the tree is gone, running when it still serves).

        Never waits for the lock: an action under way settles the record itself."""
        self._server.record_note = None
        step = self.settling()
        if step is not None:
            step()
        if self._server.recorded() is None:
            self._rebuild()
        door_steps.release_stale_hold(self._server)
        return self._server.status()

    def settling(self) -> Callable[[], None] | None:
        """The step `housekeeping` would take now, or None when the record already says what
        is there (a stopped server; a running one whose process lives). Only reads, and
        cheaply (the kept record, one read of the process's /proc entry): the console asks
        on every tick, and wakes its housekeeping thread only when there is a step to take."""
        rec = self._server.recorded()  # read only: what changes it reads its own copy
        if rec is None:
            # A file lost while the server was shown alive: rebuilt at once, not in 5 s.
            return self._rebuild if self._server.kept_alive() is not None else None
        if rec.door_pid is not None and not door.alive(rec):
            # A cheap look (the console asks every tick); an action under way holding the
            # lock starts the door itself when it needs it.
            return functools.partial(door_steps.restart_dead_unlocked, self._server)
        if rec.state in (Lifecycle.STARTING, Lifecycle.RUNNING):
            if not self._server.alive(rec):
                return self._settle_exit
            if rec.state == Lifecycle.STARTING and not self._followed(rec):
                return functools.partial(self._settle_unfollowed_load, rec)
        elif rec.state in (Lifecycle.LAUNCHING, Lifecycle.STOPPING):
            # (Its own copy when it runs, not one made each time the tick looks.)
            return lambda: self._settle_interrupted(state.copied(rec))
        elif rec.state == Lifecycle.CRASHED and _due(rec.next_restart_at):
            return self._maybe_auto_restart
        return None

    def owns_its_port(self) -> bool:
        """Whether the profile's port is its own server's, or nobody's: False when a server
        this profile did not start (by hand, or another profile's) holds it, which watching
        the port would otherwise show under this profile's name, state and log."""
        from vramtop.supervisor import adoption

        self.housekeeping()  # a lost record is rebuilt first: then it is the profile's
        rec = self._server.recorded()
        if rec is not None and rec.state in state.ALIVE and self._server.alive(rec):
            return True
        host, port = door.vllm_address(self._server.profile)  # behind its door, if any
        found = adoption.rebuilt_record(self._server.name, host, port)
        return not isinstance(found, str)

    def _rebuild(self) -> None:
        """No record to read (its file deleted or damaged): rebuild it from the server's own
        process when one of this profile's runs (see `rebuild_locked`)."""
        try:
            with state.locked(self._server.name, timeout_s=0.2):
                if self._server.recorded() is None:
                    self._server.rebuild_locked()
        except state.Busy:
            pass  # an action under way writes the record itself

    def _settle_exit(self) -> None:
        """Notice an exit nobody asked for; keep its exit code, last lines and cause."""
        try:
            with state.locked(self._server.name, timeout_s=0.2):
                rec = self._server.record()
                running = rec is not None and rec.state in (Lifecycle.STARTING, Lifecycle.RUNNING)
                if rec is not None and running and not self._server.alive(rec):
                    self._settle_gone(rec)
        except state.Busy:
            pass  # someone else is acting on it right now

    def _settle_gone(self, rec: ServerRecord) -> None:
        """Under the lock: a running or starting record whose pid is not its live server. A
        crash, unless the pid is not the server at all (a state file written over: the
        profile's own server still serves on its port, or the pid is another process), when
        the record reads as damaged instead (rebuilt, or left saying stopped)."""
        if self._server.rebuilt_over(rec) is not None:
            return
        stranger = self._server.not_ours(rec)
        if stranger is not None:
            self._server.disown_locked(rec, stranger)
            return
        self._mark_crashed(rec)

    def _followed(self, rec: ServerRecord) -> bool:
        """Whether the vramtop that launched this load still follows it to ready."""
        if rec.actor_pid is None:
            return False
        if rec.actor_pid == os.getpid():
            return True
        return tree.process_alive(rec.actor_pid, rec.actor_create_time)

    def _settle_unfollowed_load(self, rec: ServerRecord) -> None:
        """A load whose vramtop was interrupted (Ctrl+C, killed): nobody else will see it
        become ready, so /health decides."""
        if not healthy_once(server_url(rec.host, rec.port), self._server.health_timeout_s):
            return  # still loading: "starting" is the truth
        try:
            with state.locked(self._server.name, timeout_s=0.2):
                current = self._server.record()
                if (
                    current is None
                    or current.state != Lifecycle.STARTING
                    or current.launch_id != rec.launch_id
                    or self._followed(current)
                ):
                    return
                current.state, current.phase = Lifecycle.RUNNING, causes.READY
                current.actor_pid = current.actor_create_time = None
                handle.remember_tree(current)
                state.save(current)
                if current.front_door is not None:
                    door.release(current)
        except state.Busy:
            pass

    def _settle_interrupted(self, rec: ServerRecord) -> None:
        """A launch or a stop nobody is carrying out any more (its vramtop died half-way):
        the lock is free, so say what is really there instead of "starting"/"stopping"
        forever."""
        try:
            with state.locked(self._server.name, timeout_s=0.2):
                rec = self._server.record() or rec
                if rec.state == Lifecycle.LAUNCHING:
                    self._actions.recover(rec)  # finds a server launched before the pid was saved
                    rec = self._server.record() or rec
                if rec.state not in (Lifecycle.LAUNCHING, Lifecycle.STOPPING):
                    return
                if not handle.server_tree(rec):
                    rec.state, rec.tree = Lifecycle.STOPPED, {}
                    state.save(rec)
                    if rec.front_door is not None and door.alive(rec):
                        # Nobody will start it again: what the door holds is answered now.
                        door.fail(rec, "the restart was interrupted; vLLM is stopped")
                elif rec.state == Lifecycle.STOPPING and healthy_once(
                    server_url(rec.host, rec.port), self._server.health_timeout_s
                ):
                    # The stop never reached the server (or it ignored it): it serves.
                    rec.state, rec.stop_requested = Lifecycle.RUNNING, False
                    state.save(rec)
        except state.Busy:
            pass  # the launch or stop is still under way

    def _mark_crashed(self, rec: ServerRecord) -> None:
        self._server.record_exit(rec)
        self._server.end(rec, progress=None)  # an EngineCore left behind still holds VRAM
        rec.state = Lifecycle.CRASHED
        if self._server.profile.auto_restart and rec.restarts < AUTO_RESTART_LIMIT:
            rec.next_restart_at = time.time() + 2.0**rec.restarts
        state.save(rec)
        if rec.next_restart_at is not None and rec.front_door is not None and door.alive(rec):
            door.hold(rec, 0.0)  # the automatic restart comes: new requests wait for it

    def _maybe_auto_restart(self) -> None:
        """The automatic restart of a crashed server (asked for once its delay has passed)."""
        if not self._server.profile.auto_restart:
            return

        def act() -> ActionResult:
            current = self._server.record()
            if (
                current is None
                or current.state != Lifecycle.CRASHED
                or current.next_restart_at is None
            ):
                return ActionResult(True, "nothing to do")
            restarts = current.restarts + 1
            result = self._actions.start_locked(no_progress, wait_ready=False)
            new = self._server.record()
            if new is not None:
                new.restarts = restarts
                if new.state == Lifecycle.STARTING:
                    new.actor_pid, new.actor_create_time = os.getpid(), own_create_time()
                state.save(new)
                if new.state == Lifecycle.STARTING:
                    self._follow_in_background(new)
            return result if isinstance(result, ActionResult) else ActionResult(True, "started")

        result = self._server.locked(act)
        log.info("automatic restart of %s: %s", self._server.name, result.message)

    def _follow_in_background(self, rec: ServerRecord) -> None:
        """Follow an automatic restart's load to ready, as a start asked for would, without
        holding up the housekeeping step that launched it (it runs when a tick finds
        something to settle, and at least every 5 s). Left alone, the record would say
        "starting" for as long as the server runs."""

        def follow() -> None:
            result = self._follower.follow(rec, no_progress, READY_TIMEOUT_S)
            door_steps.after_action(self._server, result)
            log.info("automatic restart of %s: %s", self._server.name, result.message)

        threading.Thread(target=follow, name=f"follow-{self._server.name}", daemon=True).start()


def _due(at: float | None) -> bool:
    """Whether a time set for something (an automatic restart) has come."""
    return at is not None and time.time() >= at
