"""What every part of the supervisor shares: one profile's server as recorded (the record
store, `ServerHandle`, with the one child process this vramtop launched), and the process
helpers (its tree, its create time and group, the flags of a command line).

The parts that change the record are given a `ServerHandle`, none inherits from it:
`following` (a load, to ready), `actions` (start, stop, restart, relaunch, attach) and
`service` (housekeeping, and the `Supervisor` that holds the three).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import psutil

from vramtop import files
from vramtop.config import Profile
from vramtop.core import secrets
from vramtop.core.model import ServerInfo, ServerState
from vramtop.core.vllm import args as vllm_args
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.supervisor import causes, state, state_moves, tree
from vramtop.supervisor.readiness import healthy_once, server_url, tail
from vramtop.supervisor.state import ALIVE, Lifecycle, ServerRecord
from vramtop.supervisor.step_phases import StepClock
from vramtop.supervisor.stopping import MemoryReleased, end_server

log = logging.getLogger(__name__)

MEMORY_RELEASE_TIMEOUT_S = 10.0
LAST_LINES = 40

_T = TypeVar("_T")


def no_progress(_word: str) -> None:
    pass


class ServerHandle:
    """One profile's server. Cheap to create; holds no process of its own between calls."""

    def __init__(
        self,
        profile: Profile,
        *,
        memory_released: MemoryReleased | None = None,
        health_timeout_s: float = 1.0,
    ) -> None:
        self.profile = profile
        # The profile as its file says it: a relaunch not saved changes `profile` only.
        self.file_profile = profile
        self._profile_file = _file_key(profile.loaded_from)
        self.memory_released = memory_released
        self.health_timeout_s = health_timeout_s
        self.child: Any = None  # our own Popen, when this process launched the server
        self.released = True  # whether the last `end` saw the GPU give the memory back
        # The moments of the step under way, for its timeline event (`step_phases`).
        self.step = StepClock()
        self._records = state.RecordCache()
        # The last record `status` was asked of, and its answer: the kept record is the same
        # object for as long as its file does not change, and the console asks every tick.
        self._shown: tuple[ServerRecord, ServerInfo] | None = None
        # What the last housekeeping step, start or stop found of a lost state file (rebuilt
        # from the server's process, or why not), for `status` to say; None: nothing lost.
        self.record_note: str | None = None

    def fresh_profile(self) -> None:
        """The profile read again from its file when that file changed since it was read
        (`vramtop import --force` replaced it): a start, restart or relaunch runs the command
        the file says now, not the one an open console read when it opened. A file that no
        longer reads leaves the profile as it was (logged)."""
        path = self.profile.loaded_from
        key = _file_key(path)
        if path is None or key is None or key == self._profile_file:
            return
        from vramtop import config, profile_file

        try:
            fresh = profile_file.load_profile_file(path)
        except (config.ConfigError, OSError) as exc:
            log.warning("profile %s changed but cannot be read again: %s", path, exc)
            return
        self._profile_file = key
        if fresh.name == self.profile.name:
            log.info("profile %s changed on disk: read again", path)
            self.profile = fresh
            self.file_profile = fresh

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def log_path(self) -> Path | None:
        """Where the current server's output is: vramtop's log of the servers it starts, or
        an attached server's own file (found, or given to attach). None: an attached server
        whose output goes elsewhere (a terminal, a pipe), which vramtop cannot read."""
        rec = self.recorded()
        if rec is not None and rec.started_by == "attached":
            return Path(rec.log_path) if rec.log_path else None
        return self._records.log_path(self.name)

    @property
    def log_offset(self) -> int:
        """Where the current server's run begins in `log_path` (after vramtop's start line;
        0 for an attached server's own file)."""
        rec = self.recorded()
        return rec.log_offset if rec is not None else 0

    def record(self) -> ServerRecord | None:
        """The record, a copy of the caller's own to change and save."""
        return self._records.load(self.name)

    def recorded(self) -> ServerRecord | None:
        """The record to read only (shared: never changed), as each tick reads it."""
        return self._records.load(self.name, copy=False)

    def status(self) -> ServerInfo:
        """The server as recorded. Only reads: `housekeeping` brings the record in line
        with what is really there."""
        rec = self.recorded()
        if rec is None:
            kept = self.kept_alive()
            if kept is not None:
                # The file went while the server was shown alive: what was read of it stands
                # until housekeeping (woken by `settling`) has rebuilt the file or seen it gone.
                return kept[1]
            return ServerInfo(state=ServerState.STOPPED, profile=self.name)
        shown = self._shown  # (replaced whole: the console's threads share it)
        if shown is None or shown[0] is not rec:
            shown = self._shown = (rec, self._info(rec))
        return shown[1]

    def kept_alive(self) -> tuple[ServerRecord, ServerInfo] | None:
        """The record last shown, when it named a live server (its file since lost)."""
        shown = self._shown
        return shown if shown is not None and shown[0].state in ALIVE else None

    def rebuild_locked(self) -> ServerRecord | None:
        """Under the lock, with no record to read (its file deleted or damaged): the record
        rebuilt from what is really there, saved, or None when no server of this profile
        runs. The truth is the server's own process: the record last read here while its
        process lives, else the process on the profile's port carrying vramtop's launch id
        for this profile (see `adoption.rebuilt_record`). `record_note` says what was found."""
        path = state.state_path(self.name)
        problem = state.unreadable(self.name)
        lost = f"was unreadable ({problem})" if problem else "was missing"
        kept = self.kept_alive()
        self._shown = None
        if kept is not None and self.alive(kept[0]):
            rec = state.copied(kept[0])
        else:
            found = self._found_on_port()
            if not isinstance(found, ServerRecord):
                said = [f"the state file {path} {lost}"] if problem else []
                said += [found] if found else []
                if problem and not found:
                    said.append("no server of this profile holds its port")
                self.record_note = "; ".join(said) or None
                return None
            rec = found
        state.save(rec)
        self.record_note = f"rebuilt from the running server (pid {rec.pid}): its state file {lost}"
        log.warning("%s: %s", self.name, self.record_note)
        return rec

    def rebuilt_over(self, rec: ServerRecord) -> ServerRecord | None:
        """Under the lock, for a record whose pid is not a live server of this profile (gone,
        or `not_ours`): when this profile's own server serves on its port all the same (the
        record's pid was written over), the record rebuilt from that server, saved and
        returned, as a damaged file's is (`rebuild_locked`); None when no such server runs."""
        found = self._found_on_port()
        if not isinstance(found, ServerRecord):
            return None
        self._shown = None
        state.save(found)
        wrong = (
            f"its launch id is not the one pid {rec.pid} carries"
            if found.pid == rec.pid
            else f"it named pid {rec.pid}, which is not this profile's server"
        )
        self.record_note = f"rebuilt from the running server (pid {found.pid}): {wrong}"
        log.warning("%s: %s", self.name, self.record_note)
        return found

    def disown_locked(self, rec: ServerRecord, pid: int) -> str:
        """Under the lock: a record naming a live process that is not this profile's server
        (`not_ours`), and no server of the profile found: the process is left alone, and the
        record says stopped (not crashed: nothing of this profile ran). Returns why, in
        words, also kept in `record_note`."""
        why = (
            f"the state file {state.state_path(self.name)} named pid {pid}, which is not a "
            f"server vramtop launched for profile {self.name}; that process was left alone"
        )
        state_moves.move(rec, Lifecycle.STOPPED)
        rec.stop_requested = False
        rec.pid = rec.pgid = rec.create_time = None
        rec.tree = {}
        rec.last_error, rec.error_kind = why, None
        self._shown = None
        state.save(rec)
        self.record_note = why
        log.warning("%s: %s", self.name, why)
        return why

    def _found_on_port(self) -> ServerRecord | str | None:
        """This profile's server rebuilt from the process on its port (see
        `adoption.rebuilt_record`), its state and door found again; else why not, or None."""
        from vramtop.supervisor import adoption, door

        host, port = door.vllm_address(self.profile)  # behind its front door, if any
        found = adoption.rebuilt_record(self.name, host, port)
        if not isinstance(found, ServerRecord):
            return found
        healthy = healthy_once(server_url(found.host, found.port), self.health_timeout_s)
        if healthy:
            state_moves.move(found, Lifecycle.RUNNING)
        remember_tree(found)
        door.adopt(found, self.profile)
        return found

    def _info(self, rec: ServerRecord) -> ServerInfo:
        alive = rec.state in ALIVE
        pids = tuple(sorted(int(p) for p in rec.tree)) if alive else ()
        # A stopped server has no process: the record keeps the last run's pid for vramtop's
        # own use, but named beside "stopped" it reads as a process still there. A crashed
        # one's pid stays: it names the run whose lines the log shows.
        ended = rec.state is Lifecycle.STOPPED
        return ServerInfo(
            state=rec.state.shown,
            pid=None if ended else rec.pid,
            pgid=None if ended else rec.pgid,
            port=rec.port,
            started_at=rec.started_at,
            ready_s=rec.ready_s,
            phase=rec.phase,
            profile=rec.profile,
            argv=tuple(rec.argv),
            budget=rec.budget,
            max_model_len=rec.max_model_len,
            kv_cache_dtype=rec.kv_cache_dtype,
            pids=pids,
            returncode=rec.returncode,
            last_error=rec.last_error,
        )

    def locked(self, act: Callable[[], _T]) -> _T | ActionResult:
        try:
            with state.locked(self.name):
                return act()
        except state.Busy:
            return ActionResult(False, "another vramtop is acting on this server; try again")
        except OSError as exc:
            log.exception("supervisor action failed")
            words = files.problem_words(exc) or str(exc)  # (a full disk: the file and the fix)
            return ActionResult(False, f"could not act on the server: {words}")

    def end(
        self,
        rec: ServerRecord,
        progress: ProgressCallback | None,
        grace_s: float | None = None,
        found: dict[int, psutil.Process] | None = None,
        mark: Callable[[str], None] | None = None,
    ) -> list[psutil.Process]:
        """End the whole tree, then wait (bounded) until the GPU shows the memory back.
        `mark`: told the stop's moments (see `stopping.end_server`)."""
        survivors, self.released = end_server(
            rec,
            stop_timeout_s=self.profile.stop_timeout_s if grace_s is None else grace_s,
            reap=self.reap_child,
            memory_released=self.memory_released,
            # Read at each stop: a test shortens it.
            release_timeout_s=MEMORY_RELEASE_TIMEOUT_S,
            progress=progress,
            found=found,
            mark=mark,
        )
        return survivors

    def command_for_restart(self) -> tuple[list[str], str | None, dict[str, str] | None] | None:
        """For an adopted server: its own command line, cwd and environment (read from the
        live process, so no secret ever sits in a file). None: use the profile."""
        rec = self.record()
        if rec is None or rec.started_by != "attached":
            return None
        from vramtop.supervisor import adoption

        if rec.pid and self.alive(rec):
            return adoption.command_of(rec.pid)
        if rec.argv and vllm_args.MASK not in rec.argv:
            return list(rec.argv), rec.cwd, None
        return None

    def profile_command(
        self, overrides: dict[str, str]
    ) -> tuple[list[str], str | None, dict[str, str] | None]:
        argv = list(self.profile.argv)
        for flag, value in overrides.items():
            argv = vllm_args.set_flag(argv, flag, value)
        return argv, self.profile.cwd, None

    def alive(self, rec: ServerRecord) -> bool:
        if self.child is not None and rec.pid == self.child.pid:
            # Our own child: only Popen may collect it, or its exit code is lost (a waitpid
            # elsewhere on its zombie leaves the crash report without one).
            return self.child.poll() is None
        if not tree.process_alive(rec.pid, rec.create_time):
            return False
        # The pid is the server's only if the process says so (`tree.Identity`): a state
        # file naming another process is not trusted.
        return tree.is_server(tree.identity_of(rec))

    def not_ours(self, rec: ServerRecord) -> int | None:
        """The pid the record names when a live process has it (its recorded start) but is
        not this profile's server (`tree.Identity`); None otherwise (ours, or gone)."""
        if rec.pid is None or (self.child is not None and rec.pid == self.child.pid):
            return None
        if not tree.process_alive(rec.pid, rec.create_time) or tree.is_server(
            tree.identity_of(rec)
        ):
            return None
        return rec.pid

    def reap_child(self, timeout_s: float = 0.5) -> None:
        if self.child is not None:
            try:
                self.child.wait(timeout=timeout_s)
            except Exception:  # still running: it is not ours to wait for any longer
                log.debug("child not reaped")

    def record_exit(self, rec: ServerRecord, lines: list[str] | None = None) -> None:
        if self.child is not None and rec.pid == self.child.pid:
            rec.returncode = self.child.poll()
        if lines is None:
            lines = tail(Path(rec.log_path) if rec.log_path else None, rec.log_offset)
        # The server's own log file keeps what it printed; what vramtop records is masked.
        rec.last_lines = secrets.mask_lines(lines[-LAST_LINES:])
        cause = causes.find_cause(lines, rec.returncode)
        if cause is not None:
            rec.last_error, rec.error_kind = secrets.mask_line(cause.message), cause.kind
            rec.largest_fitting_budget = cause.largest_fitting_budget
        else:
            code = f" with code {rec.returncode}" if rec.returncode is not None else ""
            rec.last_error, rec.error_kind = f"the server exited unexpectedly{code}", "other"


# --- small functions ---------------------------------------------------------------------


def server_tree(rec: ServerRecord) -> dict[int, psutil.Process]:
    """The recorded server's processes that still live (see `tree.Identity`)."""
    return tree.find_tree(tree.identity_of(rec))


def remember_tree(rec: ServerRecord) -> None:
    """Add the server's live processes to its record (children appear while it loads)."""
    for pid, proc in server_tree(rec).items():
        with contextlib.suppress(psutil.Error):
            rec.tree[str(pid)] = proc.create_time()


def _file_key(path: Path | None) -> tuple[int, int, int] | None:
    """A file's identity for telling that it changed: inode, size, modification time."""
    if path is None:
        return None
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


@functools.cache
def own_create_time() -> float | None:
    """This vramtop's create time: with its pid, names it as a launch's follower."""
    return create_time(os.getpid())


def pgid_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
