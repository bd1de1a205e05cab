"""A step's phases for its timeline event: the moments vramtop saw itself (`StepClock`: held,
drained, stopped, memory released, launched, ready) and what vLLM's log says of the start the
step made (`core.vllm.start_phases`), read from the record's log since that start's offset.
Each step under way has its own clock (`Steps`): two at once never share their moments."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from vramtop import files
from vramtop.config import Profile
from vramtop.core.json_types import JsonObject
from vramtop.core.server_events import Event
from vramtop.core.slow_part import (
    compile_cache_dir,
    parse_mounts,
    slow_parts,
    slow_place,
    weights_dir,
)
from vramtop.core.step_report import last_step, last_total, step_events
from vramtop.core.vllm import args as vllm_args
from vramtop.core.vllm.log_run import last_run
from vramtop.core.vllm.start_phases import parse_start_phases
from vramtop.event_log import EventLog
from vramtop.supervisor.readiness import tail
from vramtop.supervisor.state import ServerRecord

log = logging.getLogger(__name__)

# A start's log is some hundred lines (a few KiB); this bounds the read of a log that
# carries far more (a chatty start, requests logged since).
READ_LIMIT = 1024 * 1024

# The moments of a step, in the order they come; each phase is the seconds from the moment
# before it that was seen (a start has no hold nor stop: its launch counts from the step's
# beginning). `held`: the door answered the hold (the drain of the answers begun included).
MOMENTS = ("began", "held", "sigterm", "exited", "memory_released", "launched", "ready")
# The moment that ends each phase, and the phase's name in the event (`sigterm` ends none:
# the stop counts from it).
PHASE_ENDED_BY = {
    "held": "held_s",
    "exited": "stopped_s",
    "memory_released": "memory_released_s",
    "launched": "launched_s",
    "ready": "ready_s",
}


class StepClock:
    """The moments of the step under way (a start, restart or relaunch), by a monotonic clock:
    `begin` at its start, `mark` as each moment comes (the first of each counts; none before
    `begin`), `phases` at its end."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._at: dict[str, float] = {}
        # What the front door's hold before the step's stop did (`Steps.held`).
        self.held: JsonObject = {}

    def begin(self) -> None:
        self._at = {"began": self._clock()}

    def mark(self, moment: str) -> None:
        if self._at and moment in MOMENTS:
            self._at.setdefault(moment, self._clock())

    def phases(self) -> JsonObject:
        """The step's phases in seconds, the ones seen (`total_s`: from its beginning to its
        last moment); taken once: the clock is idle until the next `begin`."""
        at, self._at = self._at, {}
        out: JsonObject = {}
        if not at:
            return out
        since = at["began"]
        for moment in MOMENTS[1:]:
            if moment not in at:
                continue
            name = PHASE_ENDED_BY.get(moment)
            if name is not None:
                out[name] = round(at[moment] - since, 3)
            since = at[moment]
        if len(at) > 1:
            out["total_s"] = round(max(at.values()) - at["began"], 3)
        return out


class Steps:
    """The steps under way on one server, each timed by a clock of its own: an action carries
    out its step on one thread (a person's restart on a console's action thread or a
    command's), so a moment marked on a thread is that thread's step's. An automatic restart
    launches on the housekeeping thread and follows its load on another, which carries the
    same step on (`timing(step)`). Two at once (a person's restart while an automatic
    restart's server loads: the action lock lets both act, `under_way.acting`) never count
    each other's moments nor take each other's door facts."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._here = threading.local()  # (`step`: the step this thread times now)

    @contextmanager
    def timing(self, step: StepClock | None = None) -> Iterator[StepClock]:
        """The step this thread times while the body runs: a new one begun now, or `step`,
        begun on another thread and carried on here; the thread's step before it after."""
        if step is None:
            step = StepClock(self._clock)
            step.begin()
        outer = self.current()
        self._here.step = step
        try:
            yield step
        finally:
            self._here.step = outer

    def current(self) -> StepClock | None:
        """This thread's step under way; None outside one (a stop: nothing timed)."""
        step: StepClock | None = getattr(self._here, "step", None)
        return step

    def mark(self, moment: str) -> None:
        """A moment of this thread's step (none under way: nothing counted)."""
        step = self.current()
        if step is not None:
            step.mark(moment)

    def held(self, facts: JsonObject) -> None:
        """What the front door's hold before this thread's step's stop did, for its event:
        `replayed` (the requests cancelled upstream, sent again to the new server),
        `drain_took_s` (how long the answers begun took to finish) and `drained_requests`
        (how many were let finish)."""
        step = self.current()
        if step is not None:
            step.held = facts


def start_phases(rec: ServerRecord | None) -> JsonObject:
    """The phases of the record's start as its log tells them (weights, compilation, graphs,
    engine set-up, log's start → ready), the known ones only; empty without a log."""
    if rec is None or rec.log_path is None:
        return {}
    lines = tail(Path(rec.log_path), rec.log_offset, READ_LIMIT)
    return parse_start_phases(last_run(lines)).fields()


def recorded_last_total(profile: str) -> float | None:
    """The total seconds of the profile's last timed step (`core.step_report.last_total`);
    None before any, or for a timeline that cannot be read."""
    return last_total(recorded_steps(profile))


def recorded_steps(profile: str) -> list[Event]:
    """The profile's step events as its timeline has them; none for a timeline that cannot
    be read (said in the log)."""
    try:
        return step_events(EventLog.for_profile(profile).read())
    except FileNotFoundError:
        return []
    except (OSError, files.NotYours):
        log.warning("the timeline of %s cannot be read", profile, exc_info=True)
        return []


def recorded_last_step(profile: str, door_report: object = None) -> JsonObject | None:
    """The profile's last step as its timeline has it (`core.step_report.last_step`, with
    the first request served after it where its `first_served` event came), else with the
    front door's `first_served_s` (its report's: the first request answered whole after its
    last release) where known; None before any step, or for a timeline that cannot be
    read."""
    try:
        events = EventLog.for_profile(profile).read()
    except (OSError, files.NotYours):
        return None
    step = last_step(events)
    served = door_report.get("first_served_s") if isinstance(door_report, dict) else None
    if step is not None and isinstance(served, int | float) and not isinstance(served, bool):
        phases = step["phases"]
        if isinstance(phases, dict):
            phases.setdefault("first_served_s", served)
    return step


class StepTimeline:
    """The steps a profile's timeline gains from now on (the exporter's histogram): each
    `new_steps` reads the timeline only when its file changed, and gives its step events
    written since the last call, once each."""

    def __init__(self, profile: str, since: float) -> None:
        self._log = EventLog.for_profile(profile)
        self._since = since
        self._seen: tuple[int, int] | None = None

    def new_steps(self) -> list[Event]:
        try:
            info = self._log.path.stat()
            seen = (info.st_size, info.st_mtime_ns)
            if seen == self._seen:
                return []
            events = self._log.read(since=self._since)
        except FileNotFoundError:
            return []
        except (OSError, files.NotYours):
            log.warning("the timeline of %s cannot be read", self._log.path, exc_info=True)
            return []
        self._seen = seen
        fresh = [e for e in step_events(events) if e.t > self._since]
        if fresh:
            self._since = max(e.t for e in fresh)
        return fresh


# The mount table of this machine (a test gives its own file).
MOUNTS = Path("/proc/mounts")


def model_on_slow_place(
    argv: list[str], env: dict[str, str], cwd: str | None, mounts: Path | None = None
) -> tuple[str, str] | None:
    """Where the launch's model is read from and why that is slow (`core.slow_part`), or
    None: a local disk, no model named, or a mount table that cannot be read. `env`: the
    launch's own variables (over this environment's); `cwd`: where it runs."""
    model = vllm_args.find_model(argv)
    if model is None:
        return None
    where = weights_dir(model, {**os.environ, **env}, str(Path.home()), cwd)
    try:
        table = parse_mounts((mounts or MOUNTS).read_text(errors="replace"))
    except OSError:
        return None
    place = slow_place(where, table)
    return None if place is None else (where, place)


def slow_parts_of(
    profile: Profile, phases: JsonObject, previous: JsonObject | None, mounts: Path | None = None
) -> list[str]:
    """The slow parts of a start's `phases`, each with its fix (`core.slow_part`), against
    the `previous` step's phases."""
    found = model_on_slow_place(profile.argv, profile.env, profile.cwd, mounts)
    where, place = found if found is not None else (None, None)
    cache = compile_cache_dir({**os.environ, **profile.env}, str(Path.home()))
    return slow_parts(phases, previous, weights_from=where, place=place, cache_dir=cache)
