"""Attach: adopt a vLLM server something else started, found by its port or its pid, and
record it as the profile's server."""

from __future__ import annotations

from pathlib import Path

from vramtop.outcomes import ActionResult
from vramtop.supervisor import adoption, handle, state, state_moves, tree
from vramtop.supervisor.handle import ServerHandle
from vramtop.supervisor.readiness import healthy_once, server_url
from vramtop.supervisor.state import Lifecycle

# Said of an attached server whose stdout and stderr are not files vramtop can read.
OUTPUT_ELSEWHERE = (
    "; its output goes elsewhere (a terminal or a pipe): vramtop cannot show it. "
    "Attach with --log PATH to name the file it writes to"
)


def attach_locked(
    server: ServerHandle, port: int | None, pid: int | None, log: Path | None = None
) -> ActionResult:
    """Adopt the server found by `port` or `pid` (under the profile's lock)."""
    found = adoption.find_server(port=port, pid=pid)
    if isinstance(found, str):
        return ActionResult(False, found)
    owner = tree.launched_for(found)
    if owner is not None and owner != server.name:
        return ActionResult(
            False,
            f"pid {found.pid} is the server vramtop launched for profile {owner}; "
            "nothing was attached",
            f"act on it with --profile {owner}",
        )
    rec = server.record()
    if rec is not None and server.alive(rec):
        if rec.pid == found.pid:
            return ActionResult(True, f"already attached to pid {found.pid}")
        return ActionResult(
            False,
            f"profile {server.name} already has a server (pid {rec.pid}); stop it first",
        )
    new = adoption.record_for(server.name, found, port)
    new.log_path = str(log) if log is not None else adoption.output_file(found.pid)
    if healthy_once(server_url(new.host, new.port)):  # else starting, as found
        state_moves.move(new, Lifecycle.RUNNING)
    handle.remember_tree(new)
    state.save(new)
    output = f"; its output: {new.log_path}" if new.log_path else OUTPUT_ELSEWHERE
    return ActionResult(True, f"attached to pid {found.pid} on port {new.port}{output}")
