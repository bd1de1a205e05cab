"""A state file lost or wrong, set right from the server's own process: rebuilt when it is
missing or damaged, rebuilt when its pid was written over while this profile's server serves on
its port all the same, or made to say stopped when it names another program's process (which is
left alone). What was found is said in the handle's `record_note`, for `status` to say.
"""

from __future__ import annotations

import logging

from vramtop.supervisor import state, state_moves, tree
from vramtop.supervisor.handle import ServerHandle, remember_tree
from vramtop.supervisor.readiness import healthy_once, server_url
from vramtop.supervisor.state import Lifecycle, ServerRecord

log = logging.getLogger(__name__)


class RecordRepair:
    """One profile's record set right against what is really there (its `ServerHandle`).
    Each step runs under the profile's lock (the callers hold it)."""

    def __init__(self, server: ServerHandle) -> None:
        self._server = server

    def rebuild_locked(self) -> ServerRecord | None:
        """Under the lock, with no record to read (its file deleted or damaged): the record
        rebuilt from what is really there, saved, or None when no server of this profile
        runs. The truth is the server's own process: the record last read here while its
        process lives, else the process on the profile's port carrying vramtop's launch id
        for this profile (see `adoption.rebuilt_record`). `record_note` says what was found."""
        path = state.state_path(self._server.name)
        problem = state.unreadable(self._server.name)
        lost = f"was unreadable ({problem})" if problem else "was missing"
        kept = self._server.shown.kept_alive()
        self._server.shown.forget()
        if kept is not None and self._server.alive(kept[0]):
            rec = state.copied(kept[0])
        else:
            found = self._found_on_port()
            if not isinstance(found, ServerRecord):
                said = [f"the state file {path} {lost}"] if problem else []
                said += [found] if found else []
                if problem and not found:
                    said.append("no server of this profile holds its port")
                self._server.record_note = "; ".join(said) or None
                return None
            rec = found
        state.save(rec)
        self._server.record_note = (
            f"rebuilt from the running server (pid {rec.pid}): its state file {lost}"
        )
        log.warning("%s: %s", self._server.name, self._server.record_note)
        return rec

    def rebuilt_over(self, rec: ServerRecord) -> ServerRecord | None:
        """Under the lock, for a record whose pid is not a live server of this profile (gone,
        or `not_ours`): when this profile's own server serves on its port all the same (the
        record's pid was written over), the record rebuilt from that server, saved and
        returned, as a damaged file's is (`rebuild_locked`); None when no such server runs."""
        found = self._found_on_port()
        if not isinstance(found, ServerRecord):
            return None
        self._server.shown.forget()
        state.save(found)
        wrong = (
            f"its launch id is not the one pid {rec.pid} carries"
            if found.pid == rec.pid
            else f"it named pid {rec.pid}, which is not this profile's server"
        )
        self._server.record_note = f"rebuilt from the running server (pid {found.pid}): {wrong}"
        log.warning("%s: %s", self._server.name, self._server.record_note)
        return found

    def disown_locked(self, rec: ServerRecord, pid: int) -> str:
        """Under the lock: a record naming a live process that is not this profile's server
        (`not_ours`), and no server of the profile found: the process is left alone, and the
        record says stopped (not crashed: nothing of this profile ran). Returns why, in
        words, also kept in `record_note`."""
        why = (
            f"the state file {state.state_path(self._server.name)} named pid {pid}, which is not a "
            f"server vramtop launched for profile {self._server.name}; that process was left alone"
        )
        state_moves.move(rec, Lifecycle.STOPPED)
        rec.stop_requested = False
        rec.pid = rec.pgid = rec.create_time = None
        rec.tree = {}
        rec.last_error, rec.error_kind = why, None
        self._server.shown.forget()
        state.save(rec)
        self._server.record_note = why
        log.warning("%s: %s", self._server.name, why)
        return why

    def not_ours(self, rec: ServerRecord) -> int | None:
        """The pid the record names when a live process has it (its recorded start) but is
        not this profile's server (`tree.Identity`); None otherwise (ours, or gone)."""
        if rec.pid is None or (
            self._server.child is not None and rec.pid == self._server.child.pid
        ):
            return None
        if not tree.process_alive(rec.pid, rec.create_time) or tree.is_server(
            tree.identity_of(rec)
        ):
            return None
        return rec.pid

    def _found_on_port(self) -> ServerRecord | str | None:
        """This profile's server rebuilt from the process on its port (see
        `adoption.rebuilt_record`), its state and door found again; else why not, or None."""
        from vramtop.supervisor import adoption, door

        host, port = door.vllm_address(self._server.profile)  # behind its front door, if any
        found = adoption.rebuilt_record(self._server.name, host, port)
        if not isinstance(found, ServerRecord):
            return found
        healthy = healthy_once(server_url(found.host, found.port), self._server.health_timeout_s)
        if healthy:
            state_moves.move(found, Lifecycle.RUNNING)
        remember_tree(found)
        door.adopt(found, self._server.profile)
        return found
