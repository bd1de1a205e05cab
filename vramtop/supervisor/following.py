"""Following a load to ready: the server's log for its phase and cause of failure, /health
for ready.

Runs without the profile's lock (vLLM takes a minute or more, and a wedged one forever): the
wait re-reads the record before each save and gives way when another vramtop stopped or
replaced the launch meanwhile.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.supervisor import causes, door, handle, state, state_moves
from vramtop.supervisor.door_steps import DoorControl
from vramtop.supervisor.handle import LAST_LINES, ServerHandle
from vramtop.supervisor.readiness import LogReader, client_for, healthy, server_url
from vramtop.supervisor.state import Lifecycle, ServerRecord

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 900.0
_POLL_S = 0.05
# How long the wait for ready waits for the lock before one save; when busy, the save is
# tried again on the next poll.
_SAVE_LOCK_S = 1.0


class _Superseded(Exception):
    """Another vramtop stopped or replaced this launch while it loaded."""

    def __init__(self, current: ServerRecord | None) -> None:
        super().__init__("superseded")
        self.current = current


class LoadFollower:
    """A server's load followed to ready (or to its failure), over the server's record."""

    def __init__(self, server: ServerHandle, door_control: DoorControl) -> None:
        self._server = server
        self._door = door_control

    def follow(
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
        with client_for(url, self._server.health_timeout_s) as client:
            while True:
                for line in reader.read_new():
                    lines.append(line)
                    phase = causes.phase_of(line)
                    if phase and phase != rec.phase and phase != causes.READY:
                        rec.phase = phase
                        progress(phase)
                del lines[:-LAST_LINES]
                current = self._still_ours(rec)
                if current.state == Lifecycle.CRASHED:  # another vramtop noticed the exit first
                    return self._start_failed(current, progress)
                if not self._server.alive(rec):
                    lines.extend(reader.read_new())
                    failed = self._failed_start(rec, lines, progress)
                    if failed is not None:
                        return failed
                elif healthy(client, url):
                    log.info("answered /health (pid %s)", rec.pid)
                    rec.phase = causes.READY
                    state_moves.move(rec, Lifecycle.RUNNING)
                    rec.actor_pid = rec.actor_create_time = None
                    rec.acting = rec.acting_asked_by = None
                    rec.ready_s = round(time.time() - (rec.started_at or time.time()), 3)
                    handle.remember_tree(rec)
                    if self._save_if_ours(rec):  # busy: the next poll tries again
                        self._door.release_at_ready(rec)
                        self._server.step.mark("ready")
                        progress("ready")
                        return ActionResult(True, f"ready in {rec.ready_s:.1f} s (pid {rec.pid})")
                now = time.monotonic()
                if now - seen_tree_at > 1.0:  # children appear while it loads
                    handle.remember_tree(rec)
                    self._save_if_ours(rec)
                    seen_tree_at = now
                if now > deadline:
                    rec.actor_pid = rec.actor_create_time = None  # housekeeping takes over
                    rec.acting = rec.acting_asked_by = None  # (its event says it is not ready)
                    self._save_if_ours(rec)
                    return ActionResult(
                        False, f"not ready after {timeout_s:.0f} s; it is still starting"
                    )
                time.sleep(_POLL_S)

    def _still_ours(self, rec: ServerRecord) -> ServerRecord:
        """The record as it is now; raises `_Superseded` when another vramtop has stopped
        this launch (stopping, stopped) or replaced it (another launch id or pid)."""
        current = self._server.record()
        if (
            current is None
            or current.launch_id != rec.launch_id
            or current.pid != rec.pid
            or current.state in (Lifecycle.STOPPING, Lifecycle.STOPPED)
        ):
            raise _Superseded(current)
        return current

    def _save_if_ours(self, rec: ServerRecord) -> bool:
        """Save `rec` under a short lock if the launch is still this one; False when the
        lock stayed busy (nothing saved)."""
        try:
            with state.locked(self._server.name, timeout_s=_SAVE_LOCK_S):
                door.keep_door_fields(rec, self._still_ours(rec))
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
            with state.locked(self._server.name, timeout_s=_SAVE_LOCK_S):
                current = self._still_ours(rec)
                if current.state == Lifecycle.CRASHED:
                    return self._start_failed(current, progress)
                door.keep_door_fields(rec, current)
                self._server.record_exit(rec, lines)
                # A failed start may leave an EngineCore behind: free what it holds.
                self._server.end(rec, progress=None)
                state_moves.move(rec, Lifecycle.CRASHED)
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
        if current is not None and current.state == Lifecycle.STOPPING:
            # A stop, or the stop half of a restart: it ends our child; collect it.
            self._server.reap_child(timeout_s=self._server.profile.stop_timeout_s + 1.0)
            current = self._server.record()
        else:
            self._server.reap_child()
        replaced = current is not None and (
            current.launch_id != rec.launch_id or current.pid != rec.pid
        )
        progress("stopped")
        if replaced:
            return ActionResult(
                False, "replaced while loading: another vramtop started the server again"
            )
        return ActionResult(False, "stopped while loading: another vramtop stopped the server")
