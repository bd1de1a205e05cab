"""The supervisor's actions in the lasting timeline: each start, stop, restart and relaunch
written to the profile's event log once it has answered, with who asked (`key`: a key in the
console; `command`: a command line; `guard`: the guard's own decision) and what came of it.

An action that changed nothing (a start that found the server already running, a stop with
nothing to stop, a relaunch refused before the old server stopped) is no event: nothing
happened to the server. A relaunch's detail carries its new `gpu_memory_utilization` (and
`max_model_len`, `kv_cache_dtype` where changed) and its `result`: `ok`, `rolled_back` or
`failed`, as the session's `relaunch` event does.
"""

from __future__ import annotations

import time

from vramtop.core.json_types import JsonObject
from vramtop.core.secrets import mask_line
from vramtop.event_log import EventLog
from vramtop.outcomes import ActionResult
from vramtop.supervisor.state import ServerRecord

ASKED_BY = ("key", "command", "guard")
COMMAND = "command"

Launch = tuple[str | None, str | None]  # the record's launch id and state


def launch_of(rec: ServerRecord | None) -> Launch:
    return (rec.launch_id, rec.state.value) if rec is not None else (None, None)


def outcome(result: ActionResult) -> str:
    if result.ok:
        return "ok"
    return "rolled_back" if result.rolled_back else "failed"


def write_action(
    profile: str,
    name: str,
    result: ActionResult,
    *,
    asked_by: str,
    before: Launch,
    after: Launch,
    detail: JsonObject | None = None,
) -> bool:
    """Write the action `name` that answered `result`, unless it changed nothing (`before`
    and `after`: the record's launch and state around it). False when nothing was written."""
    if before == after:
        return False
    values: JsonObject = {k: v for k, v in (detail or {}).items() if v is not None}
    values |= {
        "result": outcome(result),
        "asked_by": asked_by if asked_by in ASKED_BY else COMMAND,
        "message": mask_line(result.message),
    }
    return EventLog.for_profile(profile).append(time.time(), name, values)
