"""Housekeeping: the step that brings a profile's record in line with what is really there
(a crash nobody noticed, a load or a stop whose vramtop died half-way, a lost state file, a
door that died, a stale hold), and the automatic restart of a crashed server.

It runs only when asked: the console runs it on a thread of its own, off the tick that reads
the sample (the tick only asks `settling` whether there is anything to settle), and each
command before it reports. Never waits for the lock: an action under way settles the record
itself.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from vramtop.core.model import ServerInfo
from vramtop.outcomes import ActionResult
from vramtop.supervisor import causes, door, handle, state, state_moves, tree, under_way
from vramtop.supervisor.action_events import AUTO_RESTART, Launch, launch_of, write_interrupted
from vramtop.supervisor.actions import ServerActions
from vramtop.supervisor.actor import ActorLock
from vramtop.supervisor.door_process import DoorProcess
from vramtop.supervisor.door_steps import DoorControl
from vramtop.supervisor.following import READY_TIMEOUT_S, LoadFollower
from vramtop.supervisor.handle import ServerHandle, no_progress, own_create_time
from vramtop.supervisor.readiness import healthy_once, server_url
from vramtop.supervisor.record_repair import RecordRepair
from vramtop.supervisor.state import Lifecycle, ServerRecord
from vramtop.supervisor.step_phases import StepClock, start_phases

log = logging.getLogger(__name__)

AUTO_RESTART_LIMIT = 3

# What the supervisor is told of an automatic restart: its step begins (`StepBegun`: timed
# on this thread while the `with` runs, by a clock of its own), and it has answered
# (`Restarted`: its result once the new server serves or failed, the launch it replaced and
# its step), to be timed and written as a restart asked for is.
StepBegun = Callable[[], AbstractContextManager[StepClock]]
Restarted = Callable[[ActionResult, Launch, StepClock], object]


class Housekeeper:
    """One profile's housekeeping, over the server's record (`server`), its door's control,
    its load follower and its actions (an automatic restart is a start, timed as a step:
    `step_begun`, `restarted`)."""

    def __init__(
        self,
        server: ServerHandle,
        door_control: DoorControl,
        follower: LoadFollower,
        actions: ServerActions,
        door_process: DoorProcess,
        repair: RecordRepair,
        step_begun: StepBegun | None = None,
        restarted: Restarted = lambda result, before, step: None,
    ) -> None:
        self._server = server
        self._step_begun = step_begun or server.step.timing
        self._restarted = restarted
        self._door = door_control
        self._follower = follower
        self._actions = actions
        self._door_process = door_process
        self._repair = repair

    def housekeeping(self) -> ServerInfo:
        """One pass that settles the record against the live process tree and /health, then
        returns the server as it now is. Run by the console's housekeeping thread, by each
        command before it reports, and by anything else that reads the state for a person.

        - running/starting whose server is gone: crashed (exit code, last lines, cause),
          and, when the profile asks for it, an automatic restart once its delay has passed;
        - starting whose following vramtop is gone: running once /health answers;
        - launching/stopping whose vramtop died half-way (the lock is free): what is there
          (a found launch, stopped when the tree is gone, running when it still serves).

        Never waits for the lock: an action under way settles the record itself."""
        self._server.record_note = None
        settle = self.settling()
        if settle is not None:
            settle()
        if self._server.recorded() is None:
            self._rebuild()
        self._door.release_stale_hold()
        return self._server.shown.status()

    def settling(self) -> Callable[[], None] | None:
        """What `housekeeping` would do now, or None when the record already says what
        is there (a stopped server; a running one whose process lives). Only reads, and
        cheaply (the kept record, one read of the process's /proc entry): the console asks
        on every tick, and wakes its housekeeping thread only when there is something to settle."""
        rec = self._server.recorded()  # read only: what changes it reads its own copy
        if rec is None:
            # A file lost while the server was shown alive: rebuilt at once, not in 5 s.
            return self._rebuild if self._server.shown.kept_alive() is not None else None
        if rec.door_pid is not None and not door.alive(rec):
            # A cheap look (the console asks every tick); an action under way holding the
            # lock starts the door itself when it needs it.
            return self._door_process.restart_dead_unlocked
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

    def _rebuild(self) -> None:
        """No record to read (its file deleted or damaged): rebuild it from the server's own
        process when one of this profile's runs (see `rebuild_locked`)."""
        try:
            with state.locked(self._server.name, timeout_s=0.2):
                if self._server.recorded() is None:
                    self._repair.rebuild_locked()
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
        if self._repair.rebuilt_over(rec) is not None:
            return
        stranger = self._repair.not_ours(rec)
        if stranger is not None:
            self._repair.disown_locked(rec, stranger)
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
                state_moves.move(current, Lifecycle.RUNNING)
                current.phase = causes.READY
                if current.actor_pid is not None:  # its vramtop died before it was ready
                    found = f"vLLM became ready without it (pid {current.pid})"
                    write_interrupted(current, found, served=True, phases=start_phases(current))
                current.actor_pid = current.actor_create_time = None
                current.acting = current.acting_asked_by = None
                handle.remember_tree(current)
                state.save(current)
                self._door.release_at_ready(current)
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
                    state_moves.move(rec, Lifecycle.STOPPED)
                    rec.tree = {}
                    write_interrupted(rec, "vLLM is stopped")
                    rec.acting = rec.acting_asked_by = None
                    state.save(rec)
                    self._door.fail_held(rec, "the restart was interrupted; vLLM is stopped")
                elif rec.state == Lifecycle.STOPPING and healthy_once(
                    server_url(rec.host, rec.port), self._server.health_timeout_s
                ):
                    # The stop never reached the server (or it ignored it): it serves.
                    state_moves.move(rec, Lifecycle.RUNNING)
                    rec.stop_requested = False
                    write_interrupted(rec, f"vLLM still serves (pid {rec.pid})")
                    rec.acting = rec.acting_asked_by = None
                    state.save(rec)
        except state.Busy:
            pass  # the launch or stop is still under way

    def _mark_crashed(self, rec: ServerRecord) -> None:
        self._server.record_exit(rec)
        self._server.end(rec, progress=None)  # an EngineCore left behind still holds VRAM
        state_moves.move(rec, Lifecycle.CRASHED)
        if self._server.profile.auto_restart and rec.restarts < AUTO_RESTART_LIMIT:
            rec.next_restart_at = time.time() + 2.0**rec.restarts
        state.save(rec)
        self._door.hold_for_restart(rec)

    def _maybe_auto_restart(self) -> None:
        """The automatic restart of a crashed server (asked for once its delay has passed)."""
        if not self._server.profile.auto_restart:
            return
        said: ActorLock | None = None  # the action lock: let go here, or by the load's follower

        def act() -> ActionResult:
            nonlocal said
            current = self._server.record()
            if (
                current is None
                or current.state != Lifecycle.CRASHED
                or current.next_restart_at is None
            ):
                return ActionResult(True, "nothing to do")
            # Said as a restart under way (`status`, a console's header) from its launch to
            # the end of its load.
            said = under_way.taken(self._server.name, "restart", AUTO_RESTART)
            restarts = current.restarts + 1
            before = launch_of(current)
            with self._step_begun() as step:
                started = self._actions.start_locked(no_progress, wait_ready=False)
            result = started if isinstance(started, ActionResult) else ActionResult(True, "started")
            new = self._server.record()
            if new is not None:
                new.restarts = restarts
                if new.state == Lifecycle.STARTING:
                    new.actor_pid, new.actor_create_time = os.getpid(), own_create_time()
                    # Named in the record: a vramtop that dies before the load ends is told.
                    new.acting, new.acting_asked_by = "restart", AUTO_RESTART
                state.save(new)
            if new is not None and new.state == Lifecycle.STARTING:
                self._follow_in_background(new, before, said, step)
                said = None  # the follower lets it go
            else:  # (it failed to launch: told now)
                self._restarted(result, before, step)
            return result

        try:
            result = self._server.locked(act)
        finally:
            if said is not None:
                said.release()
        log.info("automatic restart of %s: %s", self._server.name, result.message)

    def _follow_in_background(
        self, rec: ServerRecord, before: Launch, said: ActorLock, step: StepClock
    ) -> None:
        """Follow an automatic restart's load to ready, as a start asked for would, without
        holding up the housekeeping pass that launched it (it runs when a tick finds
        something to settle, and at least every 5 s). Left alone, the record would say
        "starting" for as long as the server runs. Once it answered, the supervisor is told
        (`restarted`, the launch it replaced: `before`). `said`: the action lock that says the
        restart is under way, let go once the load is followed. `step`: the restart's own
        clock, carried on by the follower's thread (its ready is this step's)."""

        def follow() -> None:
            try:
                with self._server.step.timing(step):
                    result = self._follower.follow(rec, no_progress, READY_TIMEOUT_S)
                self._door.after_action(result)
            finally:
                said.release()
            log.info("automatic restart of %s: %s", self._server.name, result.message)
            self._restarted(result, before, step)

        threading.Thread(target=follow, name=f"follow-{self._server.name}", daemon=True).start()


def _due(at: float | None) -> bool:
    """Whether a time set for something (an automatic restart) has come."""
    return at is not None and time.time() >= at
