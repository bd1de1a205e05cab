"""What every part of the supervisor shares: one profile's server as recorded (the record
store, `ServerHandle`, with the one child process this vramtop launched), and the process
helpers (its tree, its create time and group, the flags of a command line).

The handle shows the server on each tick through its `shown` (`ShownStatus`, shown_status.py).
The parts that change the record are given a `ServerHandle`, none inherits from it:
`following` (a load, to ready), `actions` (start, stop, restart, relaunch, attach),
`record_repair` (a state file lost or wrong, set right from the server's process) and
`service` (housekeeping, and the `Supervisor` that holds them).
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
from vramtop.core.vllm import args as vllm_args
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.supervisor import causes, launch, state, tree
from vramtop.supervisor.readiness import tail
from vramtop.supervisor.shown_status import ShownStatus
from vramtop.supervisor.state import ServerRecord
from vramtop.supervisor.step_phases import Steps
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
        options_of: launch.ProfileOptions = launch.profile_option,
    ) -> None:
        self.profile = profile
        # How a command line names a profile's server, said where another one is in the way.
        self.options_of = options_of
        # The profile as its file says it: a relaunch not saved changes `profile` only.
        self.file_profile = profile
        self._profile_file = _file_key(profile.loaded_from)
        self.memory_released = memory_released
        self.health_timeout_s = health_timeout_s
        self.child: Any = None  # our own Popen, when this process launched the server
        self.released = True  # whether the last `end` saw the GPU give the memory back
        # The moments of each step under way, for its timeline event (`step_phases`): a
        # moment marked on a thread is the step that thread carries out.
        self.step = Steps()
        # The action this process carries out now and who asked it (`under_way.acting`),
        # written into the record while it runs: a vramtop killed half-way leaves it there.
        self.acting: tuple[str, str] | None = None
        self._records = state.RecordCache()
        # The server as shown on every tick, read from the kept record.
        self.shown = ShownStatus(profile.name, self.recorded)
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
