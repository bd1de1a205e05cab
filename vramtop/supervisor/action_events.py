"""The supervisor's actions in the lasting timeline: each start, stop, restart and relaunch
written to the profile's event log once it has answered, with who asked (`key`: a key in the
console; `command`: a command line; `guard`: the guard's own decision; `auto_restart`: the
profile's automatic restart after a crash, a `restart` event) and what came of it.

An action that changed nothing (a start that found the server already running, a stop with
nothing to stop, a relaunch refused before the old server stopped) is no event: nothing
happened to the server. A relaunch's detail carries its new `gpu_memory_utilization` (and
`max_model_len`, `kv_cache_dtype` where changed) and its `result`: `ok`, `rolled_back` or
`failed`, as the session's `relaunch` event does.

Both get it from one value: the `Supervisor` sets an action's outcome once, where it ends,
and tells every listener the `ActionDone` (this timeline first, then a console's session).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from vramtop.core.json_types import JsonObject
from vramtop.core.secrets import mask_line
from vramtop.core.step_report import ASKED_BY as ASKED_BY  # who asks: one rule, re-exported
from vramtop.core.step_report import AUTO_RESTART as AUTO_RESTART
from vramtop.core.step_report import COMMAND as COMMAND
from vramtop.event_log import EventLog
from vramtop.outcomes import ActionResult, Outcome
from vramtop.supervisor.state import ServerRecord

Launch = tuple[str | None, str | None]  # the record's launch id and state


def launch_of(rec: ServerRecord | None) -> Launch:
    return (rec.launch_id, rec.state.value) if rec is not None else (None, None)


@dataclass(frozen=True)
class ActionDone:
    """An action that answered: its name, its result (with its `outcome` set), who asked,
    whether it changed the server (its launch or state), its detail (a relaunch's
    changed flags, None where unchanged) and when it answered (`t`, its event's time)."""

    profile: str
    name: str
    result: ActionResult
    asked_by: str
    changed: bool
    detail: JsonObject
    t: float = field(default_factory=time.time)  # the time its event says (Unix time)

    @property
    def outcome(self) -> Outcome:
        return self.result.outcome or Outcome.of(self.result, self.changed)


# What an action's end is told to (the timeline's writer, a console's session).
ActionListener = Callable[[ActionDone], object]


def action_done(
    profile: str,
    name: str,
    result: ActionResult,
    *,
    asked_by: str,
    before: Launch,
    after: Launch,
    detail: JsonObject | None = None,
) -> ActionDone:
    """The action `name` that answered `result`, its outcome set: it changed the server
    when the record's launch or state (`before`, `after`) differ."""
    changed = before != after
    return ActionDone(
        profile=profile,
        name=name,
        result=dataclasses.replace(result, outcome=Outcome.of(result, changed)),
        asked_by=asked_by if asked_by in ASKED_BY else COMMAND,
        changed=changed,
        detail={k: v for k, v in (detail or {}).items() if v is not None},
    )


def write_action(done: ActionDone) -> bool:
    """Write the action to its profile's timeline, unless it changed nothing. False when
    nothing was written."""
    if not done.changed:
        return False
    values: JsonObject = dict(done.detail)
    values |= {
        "result": done.outcome.value,
        "asked_by": done.asked_by,
        "message": mask_line(done.result.message),
    }
    return EventLog.for_profile(done.profile).append(done.t, done.name, values)


def write_interrupted(
    rec: ServerRecord, found: str, *, served: bool = False, phases: JsonObject | None = None
) -> bool:
    """The action a vramtop left half-done on `rec` (killed, Ctrl+C), told by whoever settled
    the record after it: `found`, what was there then (`served`: the new server serves), and
    the `phases` known of it (vLLM's, from its log, where the new server served; none timed
    by vramtop, whose timer died with it). Its event carries `phases` (empty when none are
    known), as a step's event does, so a start, restart or relaunch left half-done is the
    profile's last step. Nothing is written for a record that names no action. An automatic
    restart that serves is `ok`: nobody waited on its vramtop (a one-shot command that
    launched it has ended by design), and its load's end is its outcome."""
    if rec.acting is None:
        return False
    asked_by = rec.acting_asked_by if rec.acting_asked_by in ASKED_BY else COMMAND
    if served and asked_by == AUTO_RESTART:
        outcome, said = Outcome.OK, f"{found}; the vramtop that launched it had ended"
    else:
        outcome, said = Outcome.INTERRUPTED, f"the vramtop carrying it out ended half-way; {found}"
    values: JsonObject = {"result": outcome.value, "asked_by": asked_by, "message": said}
    values["phases"] = dict(phases or {})
    return EventLog.for_profile(rec.profile).append(time.time(), rec.acting, values)
