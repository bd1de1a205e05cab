"""An action under way on a profile, for every other process to see: the process that starts,
stops, restarts or relaunches the server (a console's key, a guard, a command) holds
`action-NAME.lock` while it acts, its file saying which action, who asked for it (`asked_by`:
a key, a command, the guard, the automatic restart after a crash), by which process and since
when (`ActorLock`'s file). The record alone says a moment of it (stopped, starting), read
from another terminal as if nothing were being done; `vramtop status` reads this instead.

The kernel lets the lock go when its holder exits, however it exits: a lock left behind
never says an action is under way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vramtop import locations
from vramtop.core.step_report import ASKED_BY, UNDER_WAY, UnderWay
from vramtop.supervisor.actor import ActorLock, Holder
from vramtop.supervisor.handle import ServerHandle
from vramtop.supervisor.state import ServerRecord

log = logging.getLogger(__name__)


def action_lock_path(profile: str) -> Path:
    return locations.state_dir() / f"action-{locations.profile_file_name(profile)}.lock"


@contextmanager
def acting(server: ServerHandle, action: str, asked_by: str) -> Iterator[None]:
    """Hold the profile's action lock, naming `action`, while the body acts. Taken where free
    only: an action begun beside another (a stop of a load being started) acts all the
    same, and the first one stays the one said (`taken`). The handle knows it too
    (`server.acting`): the record it writes meanwhile names the action and who asked
    (`mark_acting`), so that one left half-done by a vramtop that died is told
    (`action_events.write_interrupted`)."""
    lock = taken(server.name, action, asked_by)
    server.acting = (action, asked_by)
    try:
        yield
    finally:
        server.acting = None
        lock.release()


# This process's actions under way, by their lock's file, in the order they began: where one
# begins beside another of this process (a person's restart while an automatic restart's
# server loads), the lock names the first, and once that one ends the next still under way
# takes it, as it began: the lock never falls silent while this process still acts.
_MINE: dict[Path, list[ActorLock]] = {}
_MINE_GUARD = threading.Lock()


class _ActionLock(ActorLock):
    """An action's lock: let go, it goes to this process's next action still under way."""

    def release(self) -> None:
        with _MINE_GUARD:
            mine = _MINE.get(self.path, [])
            if self in mine:
                mine.remove(self)
            if not mine:
                _MINE.pop(self.path, None)
            held = self.held
            super().release()
            waiting = [lock for lock in mine if not lock.held]
            if held and waiting:
                _take(waiting[0], tries=1)  # (another process may have taken it meanwhile)


def taken(profile: str, action: str, asked_by: str) -> ActorLock:
    """The profile's action lock naming `action` and who asked (`asked_by`), taken where
    free (held by another, the first action stays the one said; by another action of this
    process, this one is said once that one ends). Also for an action whose end comes later,
    on another thread (an automatic restart, its load followed in the background). Its
    `release` lets it go (and does nothing where it was not taken): called once, by whoever
    ends the action."""
    path = action_lock_path(profile)
    lock = _ActionLock(profile, action, path, asked_by=asked_by, since=time.time())
    with _MINE_GUARD:
        _take(lock)
        _MINE.setdefault(path, []).append(lock)
    return lock


def _take(lock: ActorLock, tries: int | None = None) -> None:
    try:
        # (its default tries: a console's reader probes the lock for an instant each second)
        lock.try_acquire() if tries is None else lock.try_acquire(tries)
    except OSError as exc:  # (a full disk): the action goes on, only unsaid; its own writes
        log.warning("the action lock of %s not written: %s", lock.profile, exc)  # say the disk


def mark_acting(server: ServerHandle, rec: ServerRecord) -> None:
    """`rec` says which action `server`'s process carries out on it (none: nothing said)."""
    rec.acting, rec.acting_asked_by = server.acting or (None, None)


def under_way(profile: str) -> Holder | None:
    """The action under way on `profile` (`kind`: start, stop, restart, relaunch; who asked,
    `asked_by`; its holder's `pid`; `since`: Unix time); None when none is."""
    holder = ActorLock(profile, "", action_lock_path(profile)).holder()
    return holder if holder is not None and holder["kind"] else None


def action_under_way(profile: str) -> UnderWay | None:
    """`under_way` as a value (None also for a kind that is no action: a damaged file; its
    `asked_by` None where the file names nobody `ASKED_BY` knows: an older vramtop's). One
    open of the lock's file, and one read of it while it is held: cheap enough for every
    tick of a console."""
    try:
        holder = under_way(profile)
    except OSError as exc:  # unreadable (another user's file): nothing said, never a failure
        log.warning("the action lock of %s cannot be read: %s", profile, exc)
        return None
    if holder is None or holder["kind"] not in UNDER_WAY:
        return None
    asked_by = holder["asked_by"] if holder["asked_by"] in ASKED_BY else None
    return UnderWay(holder["kind"], holder["pid"], holder["since"], asked_by)
