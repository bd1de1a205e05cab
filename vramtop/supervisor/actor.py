"""One actor per profile: whoever holds this lock notifies and acts on its own (the guard, or
a console where no guard runs); every other vramtop of that profile tells nothing, though a
person's keys and commands there still act (the guard gives way to them, and says so).

An flock on `actor-NAME.lock` in the state directory: the kernel lets it go when its holder
exits, however it exits, so a guard that systemd restarts finds it free. The file says who
holds it (`pid`, `kind`: "guard" or "console", `since`: Unix time) for the others to show;
a guard's lock also says whether it acts on its own (`auto_remedy`). The same lock, on its own
file, says an action under way (`under_way.py`: `kind` is the action, "restart" …, and
`asked_by` who asked for it).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from vramtop import files, locations, locks
from vramtop.core import bounds
from vramtop.core.json_types import JsonObject

GUARD = "guard"
CONSOLE = "console"
ACQUIRE_TRIES = 5
ACQUIRE_PAUSE_S = 0.02


# How long a guard that a console's actor lock holds up waits for that console to hand over
# (a console checks at each tick of its telling) before it leaves.
HANDOVER_WAIT_S = 10.0
HANDOVER_POLL_S = 0.1


def actor_lock_path(profile: str) -> Path:
    """The profile's actor lock (profile names are file names already)."""
    return locations.state_dir() / f"actor-{locations.profile_file_name(profile)}.lock"


def guard_lock_path(profile: str) -> Path:
    """The lock only guards take: the guard has precedence over a console, so a console that
    sees it held lets the actor lock go; a second guard is refused."""
    return locations.state_dir() / f"guard-{locations.profile_file_name(profile)}.lock"


class Holder(TypedDict):
    """Who holds a lock, as its file says (None where the file did not say it plainly)."""

    pid: int | None
    kind: str | None
    since: float | None
    # A guard's: whether it relaunches a collapse on its own (None: the file does not say).
    auto_remedy: bool | None
    # An action's: who asked for it (None: the file does not say, an older vramtop's).
    asked_by: str | None


# A lock whose file does not say who holds it (being written, or by an older vramtop).
NOBODY = Holder(pid=None, kind=None, since=None, auto_remedy=None, asked_by=None)


def _holder(record: object) -> Holder | None:
    if not isinstance(record, dict):
        return None
    pid, kind, since = record.get("pid"), record.get("kind"), record.get("since")
    auto, asked_by = record.get("auto_remedy"), record.get("asked_by")
    return {
        "pid": pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        "kind": kind if isinstance(kind, str) else None,
        "since": float(since)
        if isinstance(since, int | float) and not isinstance(since, bool)
        else None,
        "auto_remedy": auto if isinstance(auto, bool) else None,
        "asked_by": asked_by if isinstance(asked_by, str) else None,
    }


class ActorLock:
    """`try_acquire` takes the lock when free; `holder` says who holds it; `release` (or
    the process's exit) lets it go."""

    def __init__(
        self,
        profile: str,
        kind: str,
        path: Path | None = None,
        *,
        auto_remedy: bool | None = None,
        asked_by: str | None = None,
        since: float | None = None,
    ) -> None:
        self.profile = profile
        self.kind = kind
        self.path = path or actor_lock_path(profile)
        self.auto_remedy = auto_remedy  # written in the file where given (a guard's)
        self.asked_by = asked_by  # written in the file where given (an action's)
        self.since = since  # its `since` where given, else when it is taken
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self, tries: int = ACQUIRE_TRIES) -> bool:
        """Take the lock if no other process holds it; True when this one holds it now.
        `tries`: how many times to try, ACQUIRE_PAUSE_S apart (a console asks once a tick,
        on its event loop, and tries again at the next one)."""
        if self._fd is not None:
            return True
        fd = files.open_private(self.path, os.O_RDWR | os.O_CREAT)
        for attempt in range(tries):
            # Another process's `holder` probes with a shared lock for an instant.
            if locks.try_hold(fd):
                break
            if attempt == tries - 1:
                os.close(fd)
                return False
            time.sleep(ACQUIRE_PAUSE_S)
        since = self.since if self.since is not None else time.time()
        record: JsonObject = {"pid": os.getpid(), "kind": self.kind, "since": since}
        if self.auto_remedy is not None:
            record["auto_remedy"] = self.auto_remedy
        if self.asked_by is not None:
            record["asked_by"] = self.asked_by
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(record).encode() + b"\n", 0)
        except OSError:  # (a full disk): not held, nothing left open
            os.close(fd)
            raise
        self._fd = fd
        return True

    def holder(self) -> Holder | None:
        """Who holds the lock (`pid`, `kind`, `since`); None when nobody does. This process,
        when it holds it, is the holder."""
        try:
            fd = files.open_private(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            # Free: closing this descriptor lets the probe go; else held by another: read who.
            if self._fd is None and locks.try_hold(fd, shared=True):
                return None
            data = os.pread(fd, 4096, 0)
        finally:
            os.close(fd)
        try:
            record = json.loads(data)
        except (ValueError, RecursionError):  # (nested deeper than the parser recurses)
            return NOBODY
        return _holder(record)

    def wait_acquire(
        self,
        timeout_s: float = HANDOVER_WAIT_S,
        *,
        poll_s: float = HANDOVER_POLL_S,
        sleep: Callable[[float], object] = time.sleep,
        waiting: Callable[[Holder], None] | None = None,
    ) -> bool:
        """Take the lock, polling up to `timeout_s` while another process holds it (a console
        handing over); `waiting` is told the holder once, the first time it is seen."""
        deadline = time.monotonic() + timeout_s
        told = False
        while True:
            if self.try_acquire():
                return True
            if not told and waiting is not None:
                holder = self.holder()
                if holder is not None:
                    waiting(holder)
                    told = True
            if time.monotonic() >= deadline:
                return False
            sleep(poll_s)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)

    def __enter__(self) -> ActorLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def guard_lock(profile: str, *, auto_remedy: bool | None = None) -> ActorLock:
    """The profile's guard lock (held by a guard for its whole life, beside the actor lock);
    `auto_remedy`: whether the guard relaunches a collapse on its own, said in its file."""
    return ActorLock(profile, GUARD, guard_lock_path(profile), auto_remedy=auto_remedy)


def guard_holder(profile: str) -> Holder | None:
    """The guard that holds the profile's guard lock (`pid`, `kind`, `since`,
    `auto_remedy`); None when no guard runs for it."""
    return guard_lock(profile).holder()


# -- the guard's adaptive state, for `--once --json` ---------------------------------------


def guard_state_path(profile: str) -> Path:
    return locations.state_dir() / f"adaptive-{locations.profile_file_name(profile)}.json"


def write_guard_state(
    profile: str,
    *,
    outside: float,
    during: float | None,
    down: float | None,
    up: float | None,
) -> None:
    """The adaptive guard's budgets and its last steps (Unix times), written whole."""
    record = {
        "outside": outside,
        "during": during,
        "down": down,
        "up": up,
        "pid": os.getpid(),
    }
    with contextlib.suppress(OSError):  # the guard goes on; --once says nothing of it
        files.write_atomic(guard_state_path(profile), json.dumps(record).encode() + b"\n")


def read_guard_state(profile: str) -> JsonObject | None:
    """`--once --json`'s `adaptive` object (`outside`, `during`, `down`, `up`) while a guard
    runs adaptively for `profile`; None otherwise (no guard, or one that is not adaptive)."""
    holder = ActorLock(profile, CONSOLE).holder()
    if holder is None or holder.get("kind") != GUARD:
        return None
    try:
        raw = locations.read_own(guard_state_path(profile), limit=bounds.MAX_SMALL_FILE_BYTES)
        record = json.loads(raw)
    except files.NotYours:
        raise
    except (OSError, ValueError, RecursionError):  # (damaged: nested too deeply)
        return None
    if not isinstance(record, dict) or record.get("pid") != holder.get("pid"):
        return None  # an earlier guard's
    return {key: record.get(key) for key in ("outside", "during", "down", "up")}
