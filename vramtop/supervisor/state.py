"""The state file: what the next vramtop needs to find (and never duplicate) a running server.

One JSON file per profile in the state directory, written atomically (temporary file + rename,
mode 0600) so a vramtop killed mid-write never leaves half a file. A lock file beside it
(`fcntl.flock`) serialises every state-changing action, so two vramtops never fight over one
server; the kernel drops the lock when its holder dies, so a killed vramtop never wedges it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, TypedDict, TypeVar

from vramtop import files, locations, locks
from vramtop.core import bounds
from vramtop.core.model import ServerState
from vramtop.core.vllm import args as vllm_args

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class Lifecycle(StrEnum):
    """The lifecycle words stored in the file: core's `ServerState`, plus LAUNCHING (the
    launch was decided but the pid is not known yet), which a reader sees as starting."""

    LAUNCHING = "launching"
    STARTING = ServerState.STARTING.value
    RUNNING = ServerState.RUNNING.value
    STOPPING = ServerState.STOPPING.value
    STOPPED = ServerState.STOPPED.value
    CRASHED = ServerState.CRASHED.value

    @property
    def shown(self) -> ServerState:
        """The state as the session format, the console and the commands name it."""
        return ServerState.STARTING if self is Lifecycle.LAUNCHING else ServerState(self.value)


LAUNCHING = Lifecycle.LAUNCHING
# A tree may be there: the states whose processes a reader lists.
ALIVE = frozenset({Lifecycle.LAUNCHING, Lifecycle.STARTING, Lifecycle.RUNNING, Lifecycle.STOPPING})


@dataclass
class ServerRecord:
    """Everything the state file holds about one profile's server. Secrets are never in it."""

    profile: str
    state: Lifecycle = Lifecycle.STOPPED
    pid: int | None = None
    pgid: int | None = None
    create_time: float | None = None  # of `pid`: tells a reused pid from our server
    # Every process seen in the tree, pid -> create time (the EngineCore outlives its parent).
    tree: dict[str, float] = field(default_factory=dict)
    # Put into the server's environment: finds its processes even if vramtop died before it
    # learnt the pid, and processes that left the process group.
    launch_id: str | None = None
    argv: list[str] = field(default_factory=list)  # masked
    cwd: str | None = None
    host: str | None = None
    port: int | None = None
    log_path: str | None = None
    log_offset: int = 0  # where this start's output begins in the log file
    started_at: float | None = None  # epoch seconds
    ready_s: float | None = None
    phase: str | None = None
    started_by: str = "vramtop"  # "vramtop" or "attached"
    budget: float | None = None  # "gpu_memory_utilization" in the file
    max_model_len: int | None = None
    kv_cache_dtype: str | None = None
    # Flags changed by relaunches not saved to the profile: a restart keeps them.
    flag_overrides: dict[str, str] = field(default_factory=dict)
    returncode: int | None = None
    last_error: str | None = None
    error_kind: str | None = None  # "out_of_memory", "engine_dead", "other"
    largest_fitting_budget: float | None = None
    last_lines: list[str] = field(default_factory=list)
    stop_requested: bool = False
    # The vramtop following this launch to ready (pid, its create time): while it lives, it
    # settles the record itself; once it is gone, `Supervisor.housekeeping` does.
    actor_pid: int | None = None
    actor_create_time: float | None = None
    # The action that vramtop carries out ("start", "stop", "restart", "relaunch") and who asked
    # it: a vramtop that dies half-way leaves them, and whoever settles the record tells the
    # timeline the action was interrupted (`housekeeping`).
    acting: str | None = None
    acting_asked_by: str | None = None
    restarts: int = 0  # automatic restarts since the last start asked for by a person
    next_restart_at: float | None = None
    updated_at: float | None = None
    # The front door (absent in records written before it, and without one): where it
    # listens, its process (pid, create time), how often housekeeping started it again after
    # it died, and the loopback port vLLM listens on behind it (`host`/`port` say it too).
    front_door: str | None = None
    door_pid: int | None = None
    door_create_time: float | None = None
    door_restarts: int = 0
    internal_port: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServerRecord:
        """The record a state file holds. Every value must be of its field's kind (a pid a
        whole number in range, a tree of pids and starts, ...): a file is anyone's to damage,
        and a value of the wrong kind is a ValueError (the file reads as unreadable), never
        a crash later nor a number taken as a pid."""
        known = {f.name: f.type for f in fields(cls)}
        named = {_FIELD_OF.get(k, k): v for k, v in data.items()}
        values = {k: v for k, v in named.items() if k in known}
        for name, value in values.items():
            if name != "state" and not _of_kind(value, str(known[name])):
                raise ValueError(f"{name}: {value!r:.40} is not a {known[name]}")
            if name in _PIDS and value is not None and not 0 < value < _MAX_PID:
                raise ValueError(f"{name}: {value} is not a process id")
            if name in ("port", "internal_port") and value is not None and not 0 < value < 65536:
                raise ValueError(f"{name}: {value} is not a TCP port")
        if "state" in values:  # ValueError: a word this vramtop does not know
            values["state"] = Lifecycle(values["state"])
        return cls(**values)


# The record's fields the file names otherwise (its names are a contract: vLLM's own word).
_NAME_IN_FILE = {"budget": "gpu_memory_utilization"}
_FIELD_OF = {name: field for field, name in _NAME_IN_FILE.items()}

# The bound of every pid in a record: pid_t's (a pid past pid_max reads as a process gone).
_MAX_PID = 2**31
_PIDS = ("pid", "pgid", "actor_pid", "door_pid")


def _of_kind(value: object, kind: str) -> bool:
    """Whether a JSON value is of a record field's declared kind (its annotation's text)."""
    optional = kind.endswith(" | None")
    if value is None:
        return optional
    base = kind.removesuffix(" | None")
    if base == "int":
        # (a return code is negative for a signal: -9)
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63
    if base == "float":
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if base == "str":
        return isinstance(value, str)
    if base == "bool":
        return isinstance(value, bool)
    if base == "list[str]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if base == "dict[str, str]":
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    if base == "dict[str, float]":
        return isinstance(value, dict) and all(
            isinstance(k, str) and k.isdigit() and 0 < int(k) < _MAX_PID and _of_kind(v, "float")
            for k, v in value.items()
        )
    return True  # a kind not listed here is checked where it is read


def state_path(profile: str) -> Path:
    return locations.state_dir() / f"server-{locations.profile_file_name(profile)}.json"


def lock_path(profile: str) -> Path:
    return locations.state_dir() / f"server-{locations.profile_file_name(profile)}.lock"


def log_path(profile: str) -> Path:
    return locations.log_dir() / f"server-{locations.profile_file_name(profile)}.log"


def load(profile: str) -> ServerRecord | None:
    """The recorded server, or None when there is none (or the file is unreadable)."""
    return _load_for(state_path(profile), profile)


def unreadable(profile: str) -> str | None:
    """Why the profile's state file cannot be read, when it is there but cannot (damaged,
    unknown content, no permission, another profile's record); None when it reads, or is not
    there at all."""
    return _read(state_path(profile), profile)[1]


def other_profile(record: ServerRecord, profile: str) -> str | None:
    """Why a record read from `profile`'s state file is not that profile's (it names another
    one: copied from another profile's file, or written by hand); None when it is. The file
    name is the profile's one identity: such a record reads as damaged."""
    if record.profile == profile:
        return None
    return f"it is a record of profile {record.profile[:64]!r}, not of {profile!r}"


def _load_for(path: Path, profile: str) -> ServerRecord | None:
    """The record in `path`, `profile`'s state file; None (logged) where it is not there or
    cannot be used (`_read`)."""
    record, problem = _read(path, profile)
    if problem is not None:
        log.warning("state file %s is damaged: %s", path, problem)
    return record


def _read(path: Path, profile: str) -> tuple[ServerRecord | None, str | None]:
    """The record in `profile`'s state file, or why it cannot be used (damaged, unknown
    content, no permission, another profile's record); (None, None) where there is none.
    `files.NotYours` where another user could have written it (it names the pid vramtop
    signals): that is said, never read past."""
    try:
        data = json.loads(locations.read_own(path, limit=bounds.MAX_SMALL_FILE_BYTES))
    except FileNotFoundError:
        return None, None
    except files.NotYours:
        raise
    except OSError as exc:
        return None, exc.strerror or str(exc)  # (its words, without "[Errno N]")
    except RecursionError:  # nested deeper than the parser recurses: damaged as well
        return None, "nested too deeply"
    except ValueError as exc:
        return None, str(exc)
    if not isinstance(data, dict):
        return None, "not a JSON object"
    try:
        record = ServerRecord.from_json(data)
    except (TypeError, ValueError) as exc:
        return None, str(exc)
    other = other_profile(record, profile)
    return (None, other) if other is not None else (record, None)


# A file's identity as `RecordCache` compares it: inode, size, modification time.
_FileKey = tuple[int, int, int]
# A record is kept only once its file is this much older than the read: a file saved twice
# within one tick of the file system's clock (2 s on FAT) could keep its size and time and,
# the old inode freed by the rename, even its inode number, and look unchanged.
_SETTLED_S = 3.0
# Where vramtop keeps its files depends on these (see `locations`).
_WHERE_VARIABLES = ("VRAMTOP_HOME", "XDG_STATE_HOME", "HOME")


class RecordCache:
    """`load` that reads and parses the file again only when it changed.

    The console asks for the record on every tick (its reader and its housekeeping) while
    the file changes only when someone acts. A change by any process is seen on the next
    call: `save` replaces the file, which changes its inode, size or modification time. Each
    call returns a fresh copy, since callers change the record before saving it, unless the
    caller only reads (`copy=False`).

    The paths are found once for as long as where vramtop keeps its files stays the same
    (`VRAMTOP_HOME`, the XDG variables): finding them checks each directory on the way."""

    def __init__(self) -> None:
        # Replaced whole, never changed in place: the console's threads share one cache.
        self._kept: tuple[Path, _FileKey, ServerRecord] | None = None
        self._paths: tuple[tuple[str | None, ...], Path, Path] | None = None

    def _found(self, profile: str) -> tuple[Path, Path]:
        where = (profile, *(os.environ.get(name) for name in _WHERE_VARIABLES))
        paths = self._paths
        if paths is None or paths[0] != where:
            paths = self._paths = (where, state_path(profile), log_path(profile))
        return paths[1], paths[2]

    def log_path(self, profile: str) -> Path:
        """`log_path(profile)`."""
        return self._found(profile)[1]

    def load(self, profile: str, *, copy: bool = True) -> ServerRecord | None:
        """The recorded server (see `load`). `copy=False`: the record kept here, shared with
        every other such caller, which must never change it."""
        path = self._found(profile)[0]
        try:
            info = path.stat()
        except OSError:
            self._kept = None
            return _load_for(path, profile)  # gone, or unreadable: `_read` says which
        key = (info.st_ino, info.st_size, info.st_mtime_ns)
        kept = self._kept
        if kept is not None and kept[0] == path and kept[1] == key:
            return copied(kept[2]) if copy else kept[2]
        record = _load_for(path, profile)
        settled = time.time() - info.st_mtime_ns / 1e9 > _SETTLED_S
        # Read after the stat, so a save in between leaves a newer record under an older key:
        # never matched again, it is only read once more.
        if record is None or not settled:
            self._kept = None
            return record
        self._kept = (path, key, record)
        return copied(record) if copy else record


def copied(record: ServerRecord) -> ServerRecord:
    """A copy whose lists and dicts (argv, tree, last lines...) are its own: their items are
    strings and numbers, so one level is enough."""
    twin = copy.copy(record)
    for name, value in vars(record).items():
        if isinstance(value, list | dict):
            setattr(twin, name, value.copy())
    return twin


def save(record: ServerRecord) -> None:
    """Write atomically, readable only by the user.

    Not synced to disk: every reader sees the new record at once (the rename), and only a
    crash of the whole machine could lose it, when no server survives either and
    housekeeping settles whatever is left against the process tree. A sync sits on the path
    of every stop and restart, and took 0.3 s and more while vLLM loaded a model here."""
    record.updated_at = time.time()
    named = {_NAME_IN_FILE.get(k, k): v for k, v in asdict(record).items()}
    text = json.dumps(named, indent=1)
    files.write_atomic(state_path(record.profile), text.encode())


class Busy(Exception):
    """Another vramtop holds the lock for this server for longer than we are willing to wait."""


@contextlib.contextmanager
def locked(profile: str, timeout_s: float = 120.0) -> Iterator[None]:
    """Hold the profile's lock. The descriptor is not inherited by the server (O_CLOEXEC),
    otherwise the lock would live as long as the server does."""
    fd = files.open_private(lock_path(profile), os.O_RDWR | os.O_CREAT)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if locks.try_hold(fd):
                break
            if time.monotonic() > deadline:
                raise Busy(profile)
            time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class LaunchFlags(TypedDict):
    """The flags a launch's record keeps (`ServerRecord`), read from its command line; None
    where a flag is absent or cannot be read."""

    budget: float | None
    max_model_len: int | None
    kv_cache_dtype: str | None


def flags_of(argv: list[str]) -> LaunchFlags:
    return {
        "budget": _flag(vllm_args.gpu_memory_utilization, argv),
        "max_model_len": _flag(vllm_args.max_model_len, argv),
        "kv_cache_dtype": _flag(vllm_args.kv_cache_dtype, argv),
    }


def _flag(read: Callable[[list[str]], _T | None], argv: list[str]) -> _T | None:
    try:
        return read(argv)
    except ValueError:
        return None
