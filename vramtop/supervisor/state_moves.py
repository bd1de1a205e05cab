"""The moves a server's recorded state may make, as a table, and the one function that makes
them (`move`): every change of `ServerRecord.state` goes through it, so that no part of the
supervisor can write a move the table does not allow (a stop that was asked for then read
as a crash, a stopped server shown as loading).

A record is born in one of `BORN` (a launch: launching; a server found running: starting,
until /health says it serves); staying in a state is not a move, and is always allowed.
"""

from __future__ import annotations

from collections.abc import Mapping

from vramtop.supervisor.state import Lifecycle, ServerRecord

_L = Lifecycle

# Where a record may go from each state, and why each move happens.
MOVES: Mapping[Lifecycle, frozenset[Lifecycle]] = {
    # The pid is known (spawned, or found by its launch id); the spawn failed; the vramtop
    # that launched it died before the pid was saved, and no tree is left; a stop.
    _L.LAUNCHING: frozenset({_L.STARTING, _L.CRASHED, _L.STOPPING, _L.STOPPED}),
    # Ready; exited while loading; a stop (or its leftovers ended, its record disowned).
    _L.STARTING: frozenset({_L.RUNNING, _L.CRASHED, _L.STOPPING, _L.STOPPED}),
    # Exited or died unasked; a stop (or its leftovers ended, its record disowned).
    _L.RUNNING: frozenset({_L.CRASHED, _L.STOPPING, _L.STOPPED}),
    # Ended; the stop never reached it, and it serves. Never crashed: the exit was asked for.
    _L.STOPPING: frozenset({_L.STOPPED, _L.RUNNING}),
    # Leftover processes found and ended (an EngineCore that outlived its server).
    _L.STOPPED: frozenset({_L.STOPPING}),
    # Its leftovers ended (a stop), or the record settled as stopped.
    _L.CRASHED: frozenset({_L.STOPPING, _L.STOPPED}),
}

# The states a new record starts in.
BORN = frozenset({Lifecycle.LAUNCHING, Lifecycle.STARTING})


class RefusedMove(ValueError):
    """A move the table does not allow: a defect of vramtop, never of the outside world."""


def allowed(before: Lifecycle, after: Lifecycle) -> bool:
    """Whether a record in `before` may go to `after` (staying is always allowed)."""
    return before is after or after in MOVES[before]


def move(rec: ServerRecord, to: Lifecycle) -> None:
    """Set `rec`'s state to `to`; `RefusedMove` when the table does not allow it."""
    if not allowed(rec.state, to):
        raise RefusedMove(f"{rec.profile}: {rec.state.value} -> {to.value} is not a move")
    rec.state = to
