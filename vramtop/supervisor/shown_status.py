"""The server as its record says, shown on every tick: the status read from the record, kept
as long as the record is the same object (the kept record does not change while its file does
not, and the console asks every tick), and kept through a lost state file while it named a
live server, until housekeeping has rebuilt the file or seen the server gone.
"""

from __future__ import annotations

from collections.abc import Callable

from vramtop.core.model import ServerInfo, ServerState
from vramtop.supervisor.state import ALIVE, Lifecycle, ServerRecord


class ShownStatus:
    """One profile's server as last shown. Only reads: `housekeeping` brings the record in
    line with what is really there."""

    def __init__(self, profile: str, recorded: Callable[[], ServerRecord | None]) -> None:
        self._profile = profile
        self._recorded = recorded
        # The last record shown, and its answer (replaced whole: the console's threads share it).
        self._shown: tuple[ServerRecord, ServerInfo] | None = None

    def status(self) -> ServerInfo:
        """The server as recorded."""
        rec = self._recorded()
        if rec is None:
            kept = self.kept_alive()
            if kept is not None:
                # The file went while the server was shown alive: what was read of it stands
                # until housekeeping (woken by `settling`) has rebuilt the file or seen it gone.
                return kept[1]
            return ServerInfo(state=ServerState.STOPPED, profile=self._profile)
        shown = self._shown
        if shown is None or shown[0] is not rec:
            shown = self._shown = (rec, info_of(rec))
        return shown[1]

    def kept_alive(self) -> tuple[ServerRecord, ServerInfo] | None:
        """The record last shown, when it named a live server (its file since lost)."""
        shown = self._shown
        return shown if shown is not None and shown[0].state in ALIVE else None

    def forget(self) -> None:
        """What was shown no longer stands (a record rebuilt, or none found to rebuild)."""
        self._shown = None


def info_of(rec: ServerRecord) -> ServerInfo:
    """A record as the console and the commands show it."""
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
