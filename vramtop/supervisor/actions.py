"""The actions a person asks for: start, stop, restart, relaunch, attach.

Every one holds the profile's lock while it decides and launches, and everything a later
vramtop needs is in the state file, so the server outlives this process and is never started
twice. The load that follows a launch is waited for after the lock is released (`following`),
so a stop from another vramtop can end a slow or wedged one.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from vramtop.core.vllm import args as vllm_args
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.supervisor import attaching, door, handle, launch, state, state_moves, tree
from vramtop.supervisor.door_process import DoorFields, DoorProcess, strays_said
from vramtop.supervisor.door_steps import DoorControl
from vramtop.supervisor.following import READY_TIMEOUT_S, LoadFollower
from vramtop.supervisor.handle import (
    ServerHandle,
    create_time,
    no_progress,
    own_create_time,
    pgid_of,
)
from vramtop.supervisor.record_repair import RecordRepair
from vramtop.supervisor.state import Lifecycle, ServerRecord
from vramtop.supervisor.under_way import mark_acting

log = logging.getLogger(__name__)

# SIGTERM to SIGKILL when the requests in flight are lost anyway (a confirmed restart under
# load): with vramtop's steps before it and the kill's own wait, the tree is gone within
# about 3 s (measured 3.9-5.5 s with a 2 s grace on a machine 6-8x slower than usual:
# bench/bench_restart_under_load.py).
LOST_REQUESTS_GRACE_S = 1.0
# The progress word between the launch and the first phase the log names (vLLM imports its
# libraries for seconds before it starts loading weights: "loading weights" then was a guess).
LAUNCHING = "launching"


@dataclass
class Loading:
    """A server launched (or found) under the lock, still loading: the wait for it happens
    after the lock is released."""

    rec: ServerRecord


class ServerActions:
    """What a person can ask of the server; each returns an `ActionResult`, never raises for
    outside-world failures. Acts on the server's record (`server`) and hands each load to
    `follower` once the lock is released."""

    def __init__(
        self,
        server: ServerHandle,
        follower: LoadFollower,
        door_control: DoorControl,
        door_process: DoorProcess,
        repair: RecordRepair,
    ) -> None:
        self._server = server
        self._follower = follower
        self._door = door_control
        self._door_process = door_process
        self._repair = repair  # a state file lost or wrong, set right

    def start(
        self,
        progress: ProgressCallback | None = None,
        wait_ready: bool = True,
        timeout_s: float = READY_TIMEOUT_S,
    ) -> ActionResult:
        report = progress or no_progress
        self._server.fresh_profile()
        result = self.launch_then_wait(
            lambda: self.start_locked(report, wait_ready), report, timeout_s
        )
        self._door.after_action(result)
        return result

    def stop(self, progress: ProgressCallback | None = None) -> ActionResult:
        def act() -> ActionResult:
            ended = self._door_process.stop()  # first: its requests in flight finish
            result = self.stop_locked(progress or no_progress)
            if not ended:
                return result
            return replace(result, message=f"{result.message}; {strays_said(ended)}")

        return self._server.locked(act)

    def restart(
        self,
        progress: ProgressCallback | None = None,
        wait_ready: bool = True,
        timeout_s: float = READY_TIMEOUT_S,
        requests_lost: bool = False,
    ) -> ActionResult:
        """Stop, then start the same command. `requests_lost`: the person confirmed a
        restart with requests running, which are lost anyway: the server gets
        LOST_REQUESTS_GRACE_S after SIGTERM (not its full stop timeout, which uvicorn can
        spend "waiting for connections to close") before SIGKILL."""
        report = progress or no_progress
        self._server.fresh_profile()
        grace = (
            min(LOST_REQUESTS_GRACE_S, self._server.profile.stop_timeout_s)
            if requests_lost
            else None
        )

        def act() -> ActionResult | Loading:
            rec = self._server.record()
            overrides = dict(rec.flag_overrides) if rec is not None else {}
            command = self._server.command_for_restart() or self._server.profile_command(overrides)
            refused = self.refuse_without_key(command[2])
            if refused is not None:
                return refused  # before the stop: the running server stays
            unheld = self._door.hold_before_stop(report)
            if unheld is not None:
                return ActionResult(False, f"{unheld}; nothing was stopped")
            stopped = self.stop_locked(report, grace)
            if not stopped.ok:
                self._door.release_back()
                return stopped
            return self.start_locked(report, wait_ready, command, overrides)

        result = self.launch_then_wait(act, report, timeout_s)
        self._door.after_action(result)
        return result

    def attach(
        self,
        port: int | None = None,
        pid: int | None = None,
        log: Path | None = None,
        options_of: attaching.ProfileOptions = attaching.profile_option,
    ) -> ActionResult:
        """Adopt a vLLM server something else started (found by its port or its pid).

        `log`: the file its output goes to; without it, its stdout or stderr when that is a
        file. Otherwise its output goes elsewhere, and the console says so rather than show
        an earlier server's log as this one's. `options_of`: how a command line names another
        profile's server, said where that is the one found."""
        return self._server.locked(
            lambda: attaching.attach_locked(self._server, port, pid, log, options_of)
        )

    def wait_ready(
        self, progress: ProgressCallback | None = None, timeout_s: float = READY_TIMEOUT_S
    ) -> ActionResult:
        """Follow a start already under way (e.g. begun by another vramtop) until ready."""
        rec = self._server.record()
        if rec is None or not self._server.alive(rec):
            return ActionResult(False, "no server is running")
        return self._follower.follow(rec, progress or no_progress, timeout_s)

    def launch_then_wait(
        self,
        act: Callable[[], ActionResult | Loading],
        progress: ProgressCallback,
        timeout_s: float,
    ) -> ActionResult:
        """Launch under the lock; wait for ready after releasing it, so another vramtop can
        stop a slow or wedged load (a second start still finds the launch and waits too)."""
        outcome = self._server.locked(act)
        if isinstance(outcome, Loading):
            return self._follower.follow(outcome.rec, progress, timeout_s)
        return outcome

    def start_locked(
        self,
        progress: ProgressCallback,
        wait_ready: bool,
        command: tuple[list[str], str | None, dict[str, str] | None] | None = None,
        overrides: dict[str, str] | None = None,
    ) -> ActionResult | Loading:
        """Launch, or find the server already there; `Loading`: wait for it once the lock
        is released."""
        rec = self._server.record() or self._repair.rebuild_locked()
        if rec is not None:
            adopted = self.recover(rec)
            if adopted is not None:
                if rec.state == Lifecycle.STARTING and wait_ready:
                    return Loading(rec)
                return adopted
            self._clean_leftovers(rec)
        profile = self._server.profile
        host, port = profile.host, profile.port
        # With a front door, vLLM listens behind it on a loopback port of vramtop's choosing.
        internal = self._door_process.internal_port()
        if internal is not None:
            host, port = door.LOOPBACK, internal
        owner = launch.port_owner(host, port, self._server.options_of)
        if owner is not None:
            return ActionResult(
                False,
                f"port {port} is already in use by {owner}; nothing was started",
                "stop that program, or give this profile another --port",
            )
        argv, cwd, env_base = command or (list(profile.argv), profile.cwd, None)
        try:
            handed = {} if env_base is not None else self._handed_secrets()
        except launch.MissingSecret as exc:
            return ActionResult(False, *exc.args)
        # The door once nothing else refuses the launch (a door opened for nothing would hold
        # its port with no record naming it).
        door_facts: DoorFields = {}
        if internal is not None:
            opened = self._door.open_for_launch(rec, internal)
            if isinstance(opened, ActionResult):
                return opened
            door_facts = opened
            # The child's words only: the profile keeps its own.
            argv = vllm_args.set_flag(argv, vllm_args.HOST, door.LOOPBACK)
            argv = vllm_args.set_flag(argv, vllm_args.PORT, str(internal))
        else:
            self._door_process.close_unwanted(rec)
        prev = rec
        try:
            log_file = state.log_path(self._server.name)
            launch.rotate_log(log_file)
            shown = vllm_args.mask_secrets(argv)
            offset = launch.write_start_marker(log_file, self._server.name, shown)
            launch_id = uuid.uuid4().hex
            rec = ServerRecord(
                profile=self._server.name,
                state=Lifecycle.LAUNCHING,
                launch_id=launch_id,
                argv=shown,
                cwd=cwd,
                host=host,
                port=port,
                log_path=str(log_file),
                log_offset=offset,
                started_at=time.time(),
                phase=None,  # until the log names one: vLLM imports for a while before it loads
                flag_overrides=dict(overrides or {}),
                # Who follows the load to ready (nobody without `wait_ready`: then housekeeping).
                actor_pid=os.getpid() if wait_ready else None,
                actor_create_time=own_create_time() if wait_ready else None,
                **state.flags_of(argv),
                **door_facts,
            )
            if wait_ready:  # (without it, the action's event is written at the launch)
                mark_acting(self._server, rec)
            # Saved before the launch: a vramtop killed right after it still finds the server
            # by its launch id.
            state.save(rec)
        except BaseException:  # (a full disk, Ctrl+C): the door opened for this launch goes too
            self._door_process.close_opened(prev, door_facts)
            raise
        env = launch.build_env(
            profile.env if env_base is None else None,
            {
                **tree.KEEP_ENVIRON,
                tree.LAUNCH_ID_ENV: launch_id,
                tree.PROFILE_ENV: self._server.name,
                **handed,
            },
            base=env_base,
        )
        # The profile's own command (possibly with relaunch overrides) runs in its prelude;
        # an adopted server's command line is already resolved.
        prelude = profile.prelude if env_base is None else None
        progress(LAUNCHING)
        try:
            command_line = launch.build_command(argv, prelude)
            env |= launch.prelude_env(prelude)  # its text in the environment, never in argv
            child = launch.spawn(command_line, env, cwd, log_file)
            log.info("launched %s: pid %d", self._server.name, child.pid)
        except OSError as exc:
            state_moves.move(rec, Lifecycle.CRASHED)
            rec.last_error = f"could not launch: {exc}"
            rec.error_kind = "launch_failed"
            state.save(rec)
            progress("failed")
            return ActionResult(False, f"could not launch the server: {exc}")
        self._server.child = child
        self._server.step.mark("launched")
        rec.pid = rec.pgid = child.pid  # a new session: its own group, led by it
        rec.create_time = create_time(child.pid)
        rec.tree = {str(child.pid): rec.create_time} if rec.create_time else {}
        state_moves.move(rec, Lifecycle.STARTING)
        state.save(rec)
        if not wait_ready:
            return ActionResult(True, f"started (pid {child.pid}); loading")
        return Loading(rec)

    def _handed_secrets(self) -> dict[str, str]:
        return launch.handed_secrets(
            self._server.profile.api_key_env, self._server.profile.hf_token_env, os.environ
        )

    def refuse_without_key(self, env_base: dict[str, str] | None) -> ActionResult | None:
        """A profile launch whose API key variable is unset: refused (None: go ahead)."""
        if env_base is not None:
            return None  # an adopted server's own environment, key included
        try:
            self._handed_secrets()
        except launch.MissingSecret as exc:
            return ActionResult(False, *exc.args)
        return None

    def stop_locked(self, progress: ProgressCallback, grace_s: float | None = None) -> ActionResult:
        rec = self._server.record() or self._repair.rebuild_locked()
        if rec is None:
            note = f" ({self._server.record_note})" if self._server.record_note else ""
            return ActionResult(True, f"not running{note}")
        stranger = self._repair.not_ours(rec)
        if stranger is not None:
            rebuilt = self._repair.rebuilt_over(rec)
            if rebuilt is None:
                why = self._repair.disown_locked(rec, stranger)
                return ActionResult(False, f"not stopped: {why}")
            rec = rebuilt
        found = handle.server_tree(rec)
        was_running = bool(found)
        if not was_running and rec.state in (Lifecycle.STARTING, Lifecycle.RUNNING):
            rebuilt = self._repair.rebuilt_over(rec)
            if rebuilt is not None:
                rec, found = rebuilt, handle.server_tree(rebuilt)
                was_running = bool(found)
        if not was_running and rec.state in (Lifecycle.STARTING, Lifecycle.RUNNING):
            # It had exited before anyone asked (a crash housekeeping had not settled yet):
            # "stopped" would make that exit a planned one. It stays what it was: a crash.
            self._server.record_exit(rec)
            state_moves.move(rec, Lifecycle.CRASHED)
            state.save(rec)
            return ActionResult(True, f"not running: it had exited ({rec.last_error})")
        if was_running:
            progress("stopping")
            state_moves.move(rec, Lifecycle.STOPPING)
            rec.stop_requested = True
            mark_acting(self._server, rec)
            state.save(rec)
        survivors = self._server.end(rec, progress, grace_s, found, self._server.step.mark)
        released = self._server.released
        if survivors:
            # Its event says it failed (written now): nothing left to tell as interrupted.
            rec.acting = rec.acting_asked_by = None
            state.save(rec)
            return ActionResult(
                False,
                f"could not stop every process: {tree.describe(survivors)} still running",
            )
        state_moves.move(rec, Lifecycle.STOPPED)
        rec.acting = rec.acting_asked_by = None
        rec.restarts, rec.next_restart_at = 0, None
        state.save(rec)
        if not was_running:
            return ActionResult(True, "not running")
        if not released:
            # Every process is gone, but the driver still lists memory for them: say so
            # rather than a plain "stopped" the next start would contradict.
            return ActionResult(
                True,
                f"stopped, but the GPU still showed its memory held after "
                f"{handle.MEMORY_RELEASE_TIMEOUT_S:.0f} s",
            )
        return ActionResult(True, "stopped")

    def recover(self, rec: ServerRecord) -> ActionResult | None:
        """A live server already recorded (or launched by a vramtop that died before it
        learnt the pid): re-attach to it instead of starting a second one."""
        if rec.state == Lifecycle.LAUNCHING and rec.pid is None and rec.launch_id:
            procs = tree.find_by_launch_id(tree.identity_of(rec))
            roots = [p for p in procs if pgid_of(p.pid) == p.pid] or procs
            if roots:
                root = min(roots, key=lambda p: p.pid)
                rec.pid, rec.pgid = root.pid, pgid_of(root.pid)
                rec.create_time = create_time(root.pid)
                state_moves.move(rec, Lifecycle.STARTING)
                handle.remember_tree(rec)
                state.save(rec)
        if rec.state in (
            Lifecycle.STOPPING,
            Lifecycle.STOPPED,
            Lifecycle.CRASHED,
        ) or not self._server.alive(rec):
            return None
        if rec.state == Lifecycle.LAUNCHING:
            state_moves.move(rec, Lifecycle.STARTING)
            state.save(rec)
        return ActionResult(True, f"already running (pid {rec.pid}); re-attached")

    def _clean_leftovers(self, rec: ServerRecord) -> None:
        if handle.server_tree(rec):
            log.info("ending what is left of the previous server: %s", rec.pid)
            self._server.end(rec, progress=None)
            if rec.state != Lifecycle.CRASHED:
                state_moves.move(rec, Lifecycle.STOPPED)
            state.save(rec)
