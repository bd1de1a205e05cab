"""The Supervisor: start, stop, restart, relaunch and adopt one profile's vLLM server.

The console and the headless commands both use it; it never raises for outside-world
failures (they come back as `ActionResult`s). Every state-changing action holds the profile's
lock, and everything a later vramtop needs is in the state file, so the server outlives this
process and is never started twice.

The lock covers deciding and launching, not the load that follows (vLLM takes a minute or
more, and a wedged one forever): a stop from another vramtop must be able to end it. The wait
for ready re-reads the record before each save and gives way when another vramtop stopped or
replaced the launch meanwhile.

Reading the log and /health lives in `readiness`; ending the tree and waiting for the GPU to
give the memory back in `stopping`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psutil

from vramtop.backend import ActionResult, ProgressCallback
from vramtop.config import Profile
from vramtop.core import secrets, vllm_args
from vramtop.core.model import ServerInfo, ServerState
from vramtop.supervisor import causes, launch, state, tree
from vramtop.supervisor.readiness import LogReader, healthy, healthy_once, server_url, tail
from vramtop.supervisor.state import LAUNCHING, ServerRecord
from vramtop.supervisor.stopping import MemoryReleased, end_server

__all__ = ["MEMORY_RELEASE_TIMEOUT_S", "MemoryReleased", "Supervisor", "server_url"]

log = logging.getLogger(__name__)

# Said of an attached server whose stdout and stderr are not files vramtop can read.
OUTPUT_ELSEWHERE = (
    "; its output goes elsewhere (a terminal or a pipe): vramtop cannot show it. "
    "Attach with --log PATH to name the file it writes to"
)

MEMORY_RELEASE_TIMEOUT_S = 10.0
# SIGTERM to SIGKILL when the requests in flight are lost anyway (a confirmed restart under
# load): with vramtop's steps before it and the kill's own wait, the tree is gone within
# about 3 s (measured 3.9-5.5 s with a 2 s grace on a machine 6-8x slower than usual:
# bench/bench_restart_under_load.py).
LOST_REQUESTS_GRACE_S = 1.0
READY_TIMEOUT_S = 900.0
AUTO_RESTART_LIMIT = 3
LAST_LINES = 40
_POLL_S = 0.05
# How long the wait for ready waits for the lock before one save; when busy, the save is
# tried again on the next poll.
_SAVE_LOCK_S = 1.0

_T = TypeVar("_T")


def _no_progress(_word: str) -> None:
    pass


@dataclass
class _Loading:
    """A server launched (or found) under the lock, still loading: the wait for it happens
    after the lock is released."""

    rec: ServerRecord


class _Superseded(Exception):
    """Another vramtop stopped or replaced this launch while it loaded."""

    def __init__(self, current: ServerRecord | None) -> None:
        super().__init__("superseded")
        self.current = current


class Supervisor:
    """One profile's server. Cheap to create; holds no process of its own between calls."""

    def __init__(
        self,
        profile: Profile,
        *,
        memory_released: MemoryReleased | None = None,
        health_timeout_s: float = 1.0,
    ) -> None:
        self.profile = profile
        self.memory_released = memory_released
        self.health_timeout_s = health_timeout_s
        self._child: Any = None  # our own Popen, when this process launched the server
        self._released = True  # whether the last _end saw the GPU give the memory back
        self._records = state.RecordCache()

    # --- reading -------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def log_path(self) -> Path | None:
        """Where the current server's output is: vramtop's log of the servers it starts, or
        an attached server's own file (found, or given to attach). None: an attached server
        whose output goes elsewhere (a terminal, a pipe), which vramtop cannot read."""
        rec = self.record()
        if rec is not None and rec.started_by == "attached":
            return Path(rec.log_path) if rec.log_path else None
        return state.log_path(self.name)

    def record(self) -> ServerRecord | None:
        return self._records.load(self.name)

    def status(self) -> ServerInfo:
        """The server as recorded. Only reads: `housekeeping` brings the record in line
        with what is really there."""
        rec = self.record()
        if rec is None:
            return ServerInfo(state=ServerState.STOPPED, profile=self.name)
        return self._info(rec)

    def housekeeping(self) -> ServerInfo:
        """One step that settles the record against the live process tree and /health, then
        returns the server as it now is. Run by the console's timer, by each command before
        it reports, and by anything else that reads the state for a person.

        - running/starting whose server is gone: crashed (exit code, last lines, cause),
          and, when the profile asks for it, an automatic restart once its delay has passed;
        - starting whose following vramtop is gone: running once /health answers;
        - launching/stopping whose vramtop died half-way (the lock is free): what is there
          (a found launch, stopped when the tree is gone, running when it still serves).

        Never waits for the lock: an action under way settles the record itself."""
        rec = self.record()
        if rec is None:
            return ServerInfo(state=ServerState.STOPPED, profile=self.name)
        if rec.state in ("starting", "running"):
            if not self._alive(rec):
                self._settle_exit()
            elif rec.state == "starting" and not self._followed(rec):
                self._settle_unfollowed_load(rec)
        elif rec.state in (LAUNCHING, "stopping"):
            self._settle_interrupted(rec)
        elif rec.state == "crashed":
            self._maybe_auto_restart(rec)
        return self.status()

    def _settle_exit(self) -> None:
        """Notice an exit nobody asked for; keep its exit code, last lines and cause."""
        try:
            with state.locked(self.name, timeout_s=0.2):
                rec = self.record()
                running = rec is not None and rec.state in ("starting", "running")
                if rec is not None and running and not self._alive(rec):
                    self._mark_crashed(rec)
        except state.Busy:
            pass  # someone else is acting on it right now

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
        if not healthy_once(server_url(rec.host, rec.port), self.health_timeout_s):
            return  # still loading: "starting" is the truth
        try:
            with state.locked(self.name, timeout_s=0.2):
                current = self.record()
                if (
                    current is None
                    or current.state != "starting"
                    or current.launch_id != rec.launch_id
                    or self._followed(current)
                ):
                    return
                current.state, current.phase = "running", causes.READY
                current.actor_pid = current.actor_create_time = None
                self._remember_tree(current)
                state.save(current)
        except state.Busy:
            pass

    def _settle_interrupted(self, rec: ServerRecord) -> None:
        """A launch or a stop nobody is carrying out any more (its vramtop died half-way):
        the lock is free, so say what is really there instead of "starting"/"stopping"
        forever."""
        try:
            with state.locked(self.name, timeout_s=0.2):
                rec = self.record() or rec
                if rec.state == LAUNCHING:
                    self._recover(rec)  # finds a server launched before the pid was saved
                    rec = self.record() or rec
                if rec.state not in (LAUNCHING, "stopping"):
                    return
                if not self._tree(rec):
                    rec.state, rec.tree = "stopped", {}
                    state.save(rec)
                elif rec.state == "stopping" and healthy_once(
                    server_url(rec.host, rec.port), self.health_timeout_s
                ):
                    # The stop never reached the server (or it ignored it): it serves.
                    rec.state, rec.stop_requested = "running", False
                    state.save(rec)
        except state.Busy:
            pass  # the launch or stop is still under way

    # --- actions -------------------------------------------------------------------------

    def start(
        self,
        progress: ProgressCallback | None = None,
        wait_ready: bool = True,
        timeout_s: float = READY_TIMEOUT_S,
    ) -> ActionResult:
        report = progress or _no_progress
        return self._launch_then_wait(lambda: self._start(report, wait_ready), report, timeout_s)

    def stop(self, progress: ProgressCallback | None = None) -> ActionResult:
        return self._locked(lambda: self._stop(progress or _no_progress))

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
        report = progress or _no_progress
        grace = min(LOST_REQUESTS_GRACE_S, self.profile.stop_timeout_s) if requests_lost else None

        def act() -> ActionResult | _Loading:
            rec = self.record()
            overrides = dict(rec.flag_overrides) if rec is not None else {}
            command = self._command_for_restart() or self._profile_command(overrides)
            refused = self._refuse_without_key(command[2])
            if refused is not None:
                return refused  # before the stop: the running server stays
            stopped = self._stop(report, grace)
            if not stopped.ok:
                return stopped
            return self._start(report, wait_ready, command, overrides)

        return self._launch_then_wait(act, report, timeout_s)

    def relaunch(
        self,
        util: float | None = None,
        max_model_len: int | None = None,
        kv_cache_dtype: str | None = None,
        save: bool = False,
        progress: ProgressCallback | None = None,
        wait_ready: bool = True,
        timeout_s: float = READY_TIMEOUT_S,
    ) -> ActionResult:
        """Stop, then start with changed flags; the change goes into the profile's history
        (and into its file only when `save`)."""
        changes: dict[str, str | None] = {}
        if util is not None:
            changes[vllm_args.GPU_MEMORY_UTILIZATION] = f"{util:g}"
        if max_model_len is not None:
            changes[vllm_args.MAX_MODEL_LEN] = str(max_model_len)
        if kv_cache_dtype is not None:
            changes[vllm_args.KV_CACHE_DTYPE] = kv_cache_dtype
        if not changes:
            return ActionResult(
                False, "nothing to change: give a budget, max-model-len or KV dtype"
            )

        report = progress or _no_progress

        def act() -> ActionResult | _Loading:
            rec = self.record()
            overrides = dict(rec.flag_overrides) if rec is not None else {}
            overrides.update({k: v for k, v in changes.items() if v is not None})
            command = self._command_for_restart()
            if command is not None:
                argv, cwd, env = command
                for flag, value in changes.items():
                    argv = vllm_args.set_flag(argv, flag, value)
                command = (argv, cwd, env)
            self.profile = self.profile.relaunched(changes, datetime.now(UTC))
            if save:
                saved = _save_profile(self.profile)
                if saved is not None:
                    return ActionResult(False, "could not save the profile", saved)
                overrides = {}  # the profile says it now
            if command is None:
                command = self._profile_command(overrides)
            refused = self._refuse_without_key(command[2])
            if refused is not None:
                return refused  # before the stop: the running server stays
            stopped = self._stop(report)
            if not stopped.ok:
                return stopped
            return self._start(report, wait_ready, command, overrides)

        return self._launch_then_wait(act, report, timeout_s)

    def attach(
        self, port: int | None = None, pid: int | None = None, log: Path | None = None
    ) -> ActionResult:
        """Adopt a vLLM server something else started (found by its port or its pid).

        `log`: the file its output goes to; without it, its stdout or stderr when that is a
        file. Otherwise its output goes elsewhere, and the console says so rather than show
        an earlier server's log as this one's."""
        return self._locked(lambda: self._attach(port, pid, log))

    def wait_ready(
        self, progress: ProgressCallback | None = None, timeout_s: float = READY_TIMEOUT_S
    ) -> ActionResult:
        """Follow a start already under way (e.g. begun by another vramtop) until ready."""
        rec = self.record()
        if rec is None or not self._alive(rec):
            return ActionResult(False, "no server is running")
        return self._wait_ready(rec, progress or _no_progress, timeout_s)

    # --- the work, under the lock -------------------------------------------------------

    def _locked(self, act: Callable[[], _T]) -> _T | ActionResult:
        try:
            with state.locked(self.name):
                return act()
        except state.Busy:
            return ActionResult(False, "another vramtop is acting on this server; try again")
        except OSError as exc:
            log.exception("supervisor action failed")
            return ActionResult(False, f"could not act on the server: {exc}")

    def _launch_then_wait(
        self,
        act: Callable[[], ActionResult | _Loading],
        progress: ProgressCallback,
        timeout_s: float,
    ) -> ActionResult:
        """Launch under the lock; wait for ready after releasing it, so another vramtop can
        stop a slow or wedged load (a second start still finds the launch and waits too)."""
        outcome = self._locked(act)
        if isinstance(outcome, _Loading):
            return self._wait_ready(outcome.rec, progress, timeout_s)
        return outcome

    def _start(
        self,
        progress: ProgressCallback,
        wait_ready: bool,
        command: tuple[list[str], str | None, dict[str, str] | None] | None = None,
        overrides: dict[str, str] | None = None,
    ) -> ActionResult | _Loading:
        """Launch, or find the server already there; `_Loading`: wait for it once the lock
        is released."""
        rec = self.record()
        if rec is not None:
            adopted = self._recover(rec)
            if adopted is not None:
                if rec.state == "starting" and wait_ready:
                    return _Loading(rec)
                return adopted
            self._clean_leftovers(rec)
        profile = self.profile
        host, port = profile.host, profile.port
        owner = launch.port_owner(host, port)
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
        log_file = state.log_path(self.name)
        launch.rotate_log(log_file)
        shown = vllm_args.mask_secrets(argv)
        offset = launch.write_marker(log_file, f"start {self.name}: {' '.join(shown)}")
        launch_id = uuid.uuid4().hex
        rec = ServerRecord(
            profile=self.name,
            state=LAUNCHING,
            launch_id=launch_id,
            argv=shown,
            cwd=cwd,
            host=host,
            port=port,
            log_path=str(log_file),
            log_offset=offset,
            started_at=time.time(),
            phase=causes.LOADING,
            flag_overrides=dict(overrides or {}),
            # Who follows the load to ready (nobody without `wait_ready`: then housekeeping).
            actor_pid=os.getpid() if wait_ready else None,
            actor_create_time=_own_create_time() if wait_ready else None,
            **_flags_of(argv),
        )
        # Saved before the launch: a vramtop killed right after it still finds the server
        # by its launch id.
        state.save(rec)
        env = launch.build_env(
            profile.env if env_base is None else None,
            {tree.LAUNCH_ID_ENV: launch_id, **handed},
            base=env_base,
        )
        # The profile's own command (possibly with relaunch overrides) runs in its prelude;
        # an adopted server's command line is already resolved.
        prelude = profile.prelude if env_base is None else None
        progress(causes.LOADING)
        try:
            child = launch.spawn(launch.build_command(argv, prelude), env, cwd, log_file)
            log.info("launched %s: pid %d", self.name, child.pid)
        except OSError as exc:
            rec.state, rec.last_error = "crashed", f"could not launch: {exc}"
            state.save(rec)
            progress("failed")
            return ActionResult(False, f"could not launch the server: {exc}")
        self._child = child
        rec.pid = rec.pgid = child.pid  # a new session: its own group, led by it
        rec.create_time = _create_time(child.pid)
        rec.tree = {str(child.pid): rec.create_time} if rec.create_time else {}
        rec.state = "starting"
        state.save(rec)
        if not wait_ready:
            return ActionResult(True, f"started (pid {child.pid}); loading")
        return _Loading(rec)

    def _handed_secrets(self) -> dict[str, str]:
        return launch.handed_secrets(
            self.profile.api_key_env, self.profile.hf_token_env, os.environ
        )

    def _refuse_without_key(self, env_base: dict[str, str] | None) -> ActionResult | None:
        """A profile launch whose API key variable is unset: refused (None: go ahead)."""
        if env_base is not None:
            return None  # an adopted server's own environment, key included
        try:
            self._handed_secrets()
        except launch.MissingSecret as exc:
            return ActionResult(False, *exc.args)
        return None

    def _wait_ready(
        self, rec: ServerRecord, progress: ProgressCallback, timeout_s: float
    ) -> ActionResult:
        """Follow the load until /health answers. Runs without the lock: another vramtop
        may stop or restart the server meanwhile, and then this wait gives way quietly."""
        try:
            return self._follow_load(rec, progress, timeout_s)
        except _Superseded as gone:
            return self._stopped_while_loading(rec, gone.current, progress)
        except OSError as exc:
            log.exception("waiting for the server failed")
            return ActionResult(False, f"could not follow the server's start: {exc}")

    def _follow_load(
        self, rec: ServerRecord, progress: ProgressCallback, timeout_s: float
    ) -> ActionResult:
        reader = LogReader(Path(rec.log_path) if rec.log_path else None, rec.log_offset)
        url = server_url(rec.host, rec.port)
        deadline = time.monotonic() + timeout_s
        lines: list[str] = []
        seen_tree_at = 0.0
        with httpx.Client(timeout=self.health_timeout_s) as client:
            while True:
                for line in reader.read_new():
                    lines.append(line)
                    phase = causes.phase_of(line)
                    if phase and phase != rec.phase and phase != causes.READY:
                        rec.phase = phase
                        progress(phase)
                del lines[:-LAST_LINES]
                current = self._still_ours(rec)
                if current.state == "crashed":  # another vramtop noticed the exit first
                    return self._start_failed(current, progress)
                if not self._alive(rec):
                    lines.extend(reader.read_new())
                    failed = self._failed_start(rec, lines, progress)
                    if failed is not None:
                        return failed
                elif healthy(client, url):
                    log.info("answered /health (pid %s)", rec.pid)
                    rec.phase, rec.state = causes.READY, "running"
                    rec.actor_pid = rec.actor_create_time = None
                    rec.ready_s = round(time.time() - (rec.started_at or time.time()), 3)
                    self._remember_tree(rec)
                    if self._save_if_ours(rec):  # busy: the next poll tries again
                        progress("ready")
                        return ActionResult(True, f"ready in {rec.ready_s:.1f} s (pid {rec.pid})")
                now = time.monotonic()
                if now - seen_tree_at > 1.0:  # children appear while it loads
                    self._remember_tree(rec)
                    self._save_if_ours(rec)
                    seen_tree_at = now
                if now > deadline:
                    rec.actor_pid = rec.actor_create_time = None  # housekeeping takes over
                    self._save_if_ours(rec)
                    return ActionResult(
                        False, f"not ready after {timeout_s:.0f} s; it is still starting"
                    )
                time.sleep(_POLL_S)

    def _still_ours(self, rec: ServerRecord) -> ServerRecord:
        """The record as it is now; raises `_Superseded` when another vramtop has stopped
        this launch (stopping, stopped) or replaced it (another launch id or pid)."""
        current = self.record()
        if (
            current is None
            or current.launch_id != rec.launch_id
            or current.pid != rec.pid
            or current.state in ("stopping", "stopped")
        ):
            raise _Superseded(current)
        return current

    def _save_if_ours(self, rec: ServerRecord) -> bool:
        """Save `rec` under a short lock if the launch is still this one; False when the
        lock stayed busy (nothing saved)."""
        try:
            with state.locked(self.name, timeout_s=_SAVE_LOCK_S):
                self._still_ours(rec)
                state.save(rec)
                return True
        except state.Busy:
            return False

    def _failed_start(
        self, rec: ServerRecord, lines: list[str], progress: ProgressCallback
    ) -> ActionResult | None:
        """The server exited while loading: record why and end what is left. None when the
        lock stayed busy (the caller tries again)."""
        try:
            with state.locked(self.name, timeout_s=_SAVE_LOCK_S):
                current = self._still_ours(rec)
                if current.state == "crashed":
                    return self._start_failed(current, progress)
                self._record_exit(rec, lines)
                # A failed start may leave an EngineCore behind: free what it holds.
                self._end(rec, progress=None)
                rec.state = "crashed"
                state.save(rec)
        except state.Busy:
            return None
        return self._start_failed(rec, progress)

    def _start_failed(self, rec: ServerRecord, progress: ProgressCallback) -> ActionResult:
        progress("failed")
        message = rec.last_error or "the server exited during startup"
        return ActionResult(False, f"start failed: {message}", "\n".join(rec.last_lines[-10:]))

    def _stopped_while_loading(
        self, rec: ServerRecord, current: ServerRecord | None, progress: ProgressCallback
    ) -> ActionResult:
        """Not a crash: someone asked for it. Say so, and collect our child once it is gone."""
        if current is not None and current.state == "stopping":
            # A stop, or the stop half of a restart: it ends our child; collect it.
            self._reap_child(timeout_s=self.profile.stop_timeout_s + 1.0)
            current = self.record()
        else:
            self._reap_child()
        replaced = current is not None and (
            current.launch_id != rec.launch_id or current.pid != rec.pid
        )
        progress("stopped")
        if replaced:
            return ActionResult(
                False, "replaced while loading: another vramtop started the server again"
            )
        return ActionResult(False, "stopped while loading: another vramtop stopped the server")

    def _stop(self, progress: ProgressCallback, grace_s: float | None = None) -> ActionResult:
        rec = self.record()
        if rec is None:
            return ActionResult(True, "not running")
        found = self._tree(rec)
        was_running = bool(found)
        if was_running:
            progress("stopping")
            rec.state, rec.stop_requested = "stopping", True
            state.save(rec)
        survivors = self._end(rec, progress, grace_s, found)
        released = self._released
        if survivors:
            state.save(rec)
            return ActionResult(
                False,
                f"could not stop every process: {tree.describe(survivors)} still running",
            )
        rec.state = "stopped"
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
                f"{MEMORY_RELEASE_TIMEOUT_S:.0f} s",
            )
        return ActionResult(True, "stopped")

    def _end(
        self,
        rec: ServerRecord,
        progress: ProgressCallback | None,
        grace_s: float | None = None,
        found: dict[int, psutil.Process] | None = None,
    ) -> list[psutil.Process]:
        """End the whole tree, then wait (bounded) until the GPU shows the memory back."""
        survivors, self._released = end_server(
            rec,
            stop_timeout_s=self.profile.stop_timeout_s if grace_s is None else grace_s,
            reap=self._reap_child,
            memory_released=self.memory_released,
            # Read at each stop: a test shortens it.
            release_timeout_s=MEMORY_RELEASE_TIMEOUT_S,
            progress=progress,
            found=found,
        )
        return survivors

    def _attach(self, port: int | None, pid: int | None, log: Path | None = None) -> ActionResult:
        from vramtop.supervisor import attach

        found = attach.find_server(port=port, pid=pid)
        if isinstance(found, str):
            return ActionResult(False, found)
        rec = self.record()
        if rec is not None and self._alive(rec):
            if rec.pid == found.pid:
                return ActionResult(True, f"already attached to pid {found.pid}")
            return ActionResult(
                False,
                f"profile {self.name} already has a server (pid {rec.pid}); stop it first",
            )
        new = attach.record_for(self.name, found, port)
        new.log_path = str(log) if log is not None else attach.output_file(found.pid)
        new.state = "running" if healthy_once(server_url(new.host, new.port)) else "starting"
        self._remember_tree(new)
        state.save(new)
        output = f"; its output: {new.log_path}" if new.log_path else OUTPUT_ELSEWHERE
        return ActionResult(True, f"attached to pid {found.pid} on port {new.port}{output}")

    # --- helpers -------------------------------------------------------------------------

    def _recover(self, rec: ServerRecord) -> ActionResult | None:
        """A live server already recorded (or launched by a vramtop that died before it
        learnt the pid): re-attach to it instead of starting a second one."""
        if rec.state == LAUNCHING and rec.pid is None and rec.launch_id:
            procs = tree.find_by_launch_id(rec.launch_id)
            roots = [p for p in procs if _pgid(p.pid) == p.pid] or procs
            if roots:
                root = min(roots, key=lambda p: p.pid)
                rec.pid, rec.pgid = root.pid, _pgid(root.pid)
                rec.create_time = _create_time(root.pid)
                rec.state = "starting"
                self._remember_tree(rec)
                state.save(rec)
        if rec.state in ("stopping", "stopped", "crashed") or not self._alive(rec):
            return None
        if rec.state == LAUNCHING:
            rec.state = "starting"
            state.save(rec)
        return ActionResult(True, f"already running (pid {rec.pid}); re-attached")

    def _clean_leftovers(self, rec: ServerRecord) -> None:
        if self._tree(rec):
            log.info("ending what is left of the previous server: %s", rec.pid)
            self._end(rec, progress=None)
            if rec.state != "crashed":
                rec.state = "stopped"
            state.save(rec)

    def _command_for_restart(self) -> tuple[list[str], str | None, dict[str, str] | None] | None:
        """For an adopted server: its own command line, cwd and environment (read from the
        live process, so no secret ever sits in a file). None: use the profile."""
        rec = self.record()
        if rec is None or rec.started_by != "attached":
            return None
        from vramtop.supervisor import attach

        if rec.pid and self._alive(rec):
            return attach.command_of(rec.pid)
        if rec.argv and vllm_args.MASK not in rec.argv:
            return list(rec.argv), rec.cwd, None
        return None

    def _profile_command(
        self, overrides: dict[str, str]
    ) -> tuple[list[str], str | None, dict[str, str] | None]:
        argv = list(self.profile.argv)
        for flag, value in overrides.items():
            argv = vllm_args.set_flag(argv, flag, value)
        return argv, self.profile.cwd, None

    def _alive(self, rec: ServerRecord) -> bool:
        if self._child is not None and rec.pid == self._child.pid:
            # Our own child: only Popen may collect it, or its exit code is lost (a waitpid
            # elsewhere on its zombie leaves the crash report without one).
            return self._child.poll() is None
        return tree.process_alive(rec.pid, rec.create_time)

    def _tree(self, rec: ServerRecord) -> dict[int, psutil.Process]:
        return tree.find_tree(rec.pid, rec.pgid, rec.tree, rec.launch_id)

    def _remember_tree(self, rec: ServerRecord) -> None:
        for pid, proc in self._tree(rec).items():
            with contextlib.suppress(psutil.Error):
                rec.tree[str(pid)] = proc.create_time()

    def _reap_child(self, timeout_s: float = 0.5) -> None:
        if self._child is not None:
            try:
                self._child.wait(timeout=timeout_s)
            except Exception:  # still running: it is not ours to wait for any longer
                log.debug("child not reaped")

    def _record_exit(self, rec: ServerRecord, lines: list[str] | None = None) -> None:
        if self._child is not None and rec.pid == self._child.pid:
            rec.returncode = self._child.poll()
        if lines is None:
            lines = tail(Path(rec.log_path) if rec.log_path else None, rec.log_offset)
        # The server's own log file keeps what it printed; what vramtop records is masked.
        rec.last_lines = secrets.mask_lines(lines[-LAST_LINES:])
        cause = causes.find_cause(lines)
        if cause is not None:
            rec.last_error, rec.error_kind = secrets.mask_line(cause.message), cause.kind
            rec.largest_fitting_budget = cause.largest_fitting_budget
        else:
            code = f" with code {rec.returncode}" if rec.returncode is not None else ""
            rec.last_error, rec.error_kind = f"the server exited unexpectedly{code}", "other"

    def _mark_crashed(self, rec: ServerRecord) -> None:
        self._record_exit(rec)
        self._end(rec, progress=None)  # an EngineCore left behind still holds VRAM
        rec.state = "crashed"
        if getattr(self.profile, "auto_restart", False) and rec.restarts < AUTO_RESTART_LIMIT:
            rec.next_restart_at = time.time() + 2.0**rec.restarts
        state.save(rec)

    def _maybe_auto_restart(self, rec: ServerRecord) -> None:
        if rec.next_restart_at is None or time.time() < rec.next_restart_at:
            return
        if not getattr(self.profile, "auto_restart", False):
            return

        def act() -> ActionResult:
            current = self.record()
            if current is None or current.state != "crashed" or current.next_restart_at is None:
                return ActionResult(True, "nothing to do")
            restarts = current.restarts + 1
            result = self._start(_no_progress, wait_ready=False)
            new = self.record()
            if new is not None:
                new.restarts = restarts
                if new.state == "starting":
                    new.actor_pid, new.actor_create_time = os.getpid(), _own_create_time()
                state.save(new)
                if new.state == "starting":
                    self._follow_in_background(new)
            return result if isinstance(result, ActionResult) else ActionResult(True, "started")

        result = self._locked(act)
        log.info("automatic restart of %s: %s", self.name, result.message)

    def _follow_in_background(self, rec: ServerRecord) -> None:
        """Follow an automatic restart's load to ready, as a start asked for would, without
        holding up the poll that launched it (the console reads status every second). Left
        alone, the record would say "starting" for as long as the server runs."""

        def follow() -> None:
            result = self._wait_ready(rec, _no_progress, READY_TIMEOUT_S)
            log.info("automatic restart of %s: %s", self.name, result.message)

        threading.Thread(target=follow, name=f"follow-{self.name}", daemon=True).start()

    def _info(self, rec: ServerRecord) -> ServerInfo:
        word = "starting" if rec.state == LAUNCHING else rec.state
        alive = rec.state in ("starting", "running", "stopping", LAUNCHING)
        pids = tuple(sorted(int(p) for p in rec.tree)) if alive else ()
        return ServerInfo(
            state=ServerState(word),
            pid=rec.pid,
            pgid=rec.pgid,
            port=rec.port,
            started_at=rec.started_at,
            ready_s=rec.ready_s,
            phase=rec.phase,
            profile=rec.profile,
            argv=tuple(rec.argv),
            gpu_memory_utilization=rec.gpu_memory_utilization,
            max_model_len=rec.max_model_len,
            kv_cache_dtype=rec.kv_cache_dtype,
            pids=pids,
            returncode=rec.returncode,
            last_error=rec.last_error,
        )


# --- small functions ---------------------------------------------------------------------


def _flags_of(argv: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, read in (
        ("gpu_memory_utilization", vllm_args.gpu_memory_utilization),
        ("max_model_len", vllm_args.max_model_len),
        ("kv_cache_dtype", vllm_args.kv_cache_dtype),
    ):
        try:
            out[key] = read(argv)
        except ValueError:
            out[key] = None
    return out


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


@functools.cache
def _own_create_time() -> float | None:
    """This vramtop's create time: with its pid, names it as a launch's follower."""
    return _create_time(os.getpid())


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _save_profile(profile: Profile) -> str | None:
    """Write the profile back to its file; returns what went wrong, or None."""
    try:
        from vramtop import config, locations

        config.save_profile_file(locations.profiles_dir() / f"{profile.name}.toml", profile)
    except Exception as exc:  # a write failure is reported, never raised
        return str(exc)
    return None
