"""A step (a start, restart or relaunch) as its timeline event tells it: the last step's
phases for `status --json` and `--once --json`, the total the console gives as the next
step's expected time, and the phases' seconds the exporter counts in its histogram.

Pure: the profile's timeline events in, values out.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from vramtop.core.json_types import JsonObject, JsonValue
from vramtop.core.server_events import Event, EventName

STEPS = (EventName.START, EventName.RESTART, EventName.RELAUNCH)
# Who asks for an action (its event's `asked_by`); an event naming none of them: a command.
# `auto_restart`: the profile's automatic restart after a crash (a `restart` event).
ASKED_BY = ("key", "command", "guard", "auto_restart")
COMMAND = "command"
# An action's own word while it runs, said where the server's state would be: the console's
# header (● restarting) and `vramtop status` from any terminal (demo: restarting, 12 s so far).
UNDER_WAY = {
    "start": "starting",
    "stop": "stopping",
    "restart": "restarting",
    "relaunch": "relaunching",
}

AUTO_RESTART = "auto_restart"
# Who asked, in words ("a restart by a key in a console"); the automatic restart is said
# apart (`asked_by_words`).
ASKER_WORDS = {"key": "a key in a console", "command": "a command", "guard": "the guard"}


def asked_by_words(asked_by: object) -> str | None:
    """Who asked for an action under way, said beside it: "by a key in a console", "automatic
    (the server had crashed)"; None for anyone else (a lock that does not say)."""
    if asked_by == AUTO_RESTART:
        return "automatic (the server had crashed)"
    who = ASKER_WORDS.get(asked_by) if isinstance(asked_by, str) else None
    return None if who is None else f"by {who}"


@dataclass(frozen=True)
class UnderWay:
    """An action under way on a profile's server, by whichever vramtop takes it (a console's
    key, a guard, a command, an automatic restart after a crash): which (`action`, a key of
    `UNDER_WAY`), the process taking it (`pid`), since when (`since`, Unix time) and who asked
    for it (`asked_by`, one of `ASKED_BY`); None for any where its lock's file does not say
    (`asked_by`: written by an older vramtop)."""

    action: str
    pid: int | None
    since: float | None
    asked_by: str | None = None

    @property
    def state_word(self) -> str:
        """Its own word, said where the server's state would be ("restarting")."""
        return UNDER_WAY[self.action]

    def seconds(self, now: float) -> float | None:
        """Its seconds so far at `now` (Unix time); None where its start is not known."""
        return None if self.since is None else max(0.0, now - self.since)

    def to_json(self, now: float) -> JsonObject:
        """`under_way` as `status --json` and `--once --json` give it: `action`,
        `state_word`, `pid`, `since`, `seconds` (so far, at `now`) and `asked_by`."""
        seconds = self.seconds(now)
        return {
            "action": self.action,
            "state_word": self.state_word,
            "pid": self.pid,
            "since": self.since,
            "seconds": None if seconds is None else round(seconds, 1),
            "asked_by": self.asked_by,
        }


def under_way_said(under_way: Mapping[str, JsonValue], state: str) -> str:
    """An action under way (`UnderWay.to_json`'s) where the server's `state` would be said,
    its own word first, who asked where known, and the record's state beside it, as `status`
    and `--once` say it (`restarting, 12 s so far, automatic (the server had crashed) · the
    server is stopped`)."""
    so_far = under_way.get("seconds")
    seconds = f", {so_far:.0f} s so far" if isinstance(so_far, int | float) else ""
    who = asked_by_words(under_way.get("asked_by"))
    by = f", {who}" if who is not None else ""
    return f"{under_way.get('state_word')}{seconds}{by} · the server is {state}"


# The phases counted in seconds, in the order a step goes through them (vramtop's own, then
# vLLM's from its log), by their name in the event's `phases` (less `_s`: the exporter's
# `phase` label). `total` is the whole step. (The door's `first_served_s` comes after the
# event is written: a `first_served` event of its own carries it, which `last_step` adds;
# the histogram has none.)
PHASE_SECONDS = (
    "held_s",
    "drained_s",
    "stopped_s",
    "memory_released_s",
    "launched_s",
    "weights_s",
    "compile_s",
    "graphs_s",
    "engine_init_s",
    "ready_s",
    "total_s",
)


def _phases(event: Event) -> Mapping[str, JsonValue] | None:
    phases = event.detail.get("phases")
    return phases if isinstance(phases, dict) else None


def step_events(events: Iterable[Event]) -> list[Event]:
    """The events of steps that carry their phases, in the timeline's order."""
    return [e for e in events if e.name in STEPS and _phases(e) is not None]


def last_step(events: Sequence[Event]) -> JsonObject | None:
    """The last step as `status --json` and `--once --json` give it (`last_step`): what it
    was (`action`), when (`t`, Unix time), its `result`, its `message` (what its event says:
    why it failed, what an interrupted one left; None where it says nothing), its `phases`
    (with `first_served_s` where its `first_served` event came; empty where none were timed:
    one left half-done by a vramtop that was killed) and its `slow_parts` (each slow part
    named with its fix; empty when none was); None before any."""
    steps = step_events(events)
    if not steps:
        return None
    last = steps[-1]
    phases = dict(_phases(last) or {})
    served = first_served(events, last)
    if served is not None:
        phases["first_served_s"] = served
    return {
        "action": str(last.name),
        "t": last.t,
        "result": last.detail.get("result"),
        "message": message if isinstance(message := last.detail.get("message"), str) else None,
        "phases": phases,
        "slow_parts": [w for w in _list(last.detail.get("slow_parts")) if isinstance(w, str)],
    }


def first_served(events: Iterable[Event], step: Event) -> float | None:
    """The seconds from the step's release to the first request the front door answered
    whole after it, as its `first_served` event says (written after the step's own, tied to
    it by the step's kind and its event's time: `step`, `step_t`); None where none came."""
    for event in events:
        if event.name != EventName.FIRST_SERVED:
            continue
        detail = event.detail
        if detail.get("step") == str(step.name) and detail.get("step_t") == step.t:
            return _seconds(detail.get("first_served_s"))
    return None


@dataclass(frozen=True)
class LastStep:
    """The latest step of one kind (start, restart, relaunch): when its event was written
    (Unix time), who asked, its result (`ok`, `failed`...) and total seconds (None: not
    said)."""

    t: float
    asked_by: str
    result: str | None
    total_s: float | None


@dataclass(frozen=True)
class StepCounts:
    """The steps the exporter saw written: counted by (kind, who asked), and the latest of
    each kind."""

    counted: Mapping[tuple[str, str], int] = field(default_factory=dict)
    latest: Mapping[str, LastStep] = field(default_factory=dict)

    @classmethod
    def start(cls, latest: Mapping[str, LastStep]) -> StepCounts:
        """None counted yet (each kind and asker at 0), the latest as the timeline has them."""
        return cls({(str(kind), who): 0 for kind in STEPS for who in ASKED_BY}, latest)


def asked_by(event: Event) -> str:
    """Who asked for the step (`ASKED_BY`): as its event says; a command where it says none
    of them (as the timeline's writer counts it)."""
    said = event.detail.get("asked_by")
    return said if isinstance(said, str) and said in ASKED_BY else COMMAND


def latest_steps(before: Mapping[str, LastStep], events: Iterable[Event]) -> dict[str, LastStep]:
    """`before` with each step event as the latest of its kind (the timeline's order)."""
    out = dict(before)
    for event in step_events(events):
        result = event.detail.get("result")
        out[str(event.name)] = LastStep(
            t=event.t,
            asked_by=asked_by(event),
            result=result if isinstance(result, str) else None,
            total_s=_seconds((_phases(event) or {}).get("total_s")),
        )
    return out


def count_steps(before: StepCounts, events: Iterable[Event]) -> StepCounts:
    """`before` with each new step event counted, and the latest of each kind."""
    steps = step_events(events)
    counted = dict(before.counted)
    for event in steps:
        key = (str(event.name), asked_by(event))
        counted[key] = counted.get(key, 0) + 1
    return StepCounts(counted, latest_steps(before.latest, steps))


def last_total(events: Sequence[Event]) -> float | None:
    """The total seconds of the last step that was timed (one left half-done was not): what
    the console gives as the next step's expected time; None before any."""
    for event in reversed(step_events(events)):
        total = _seconds((_phases(event) or {}).get("total_s"))
        if total is not None:
            return total
    return None


def phase_seconds(event: Event) -> dict[str, float]:
    """A step event's phases in seconds, by phase (`held`, `stopped`, ..., `total`)."""
    phases = _phases(event) or {}
    out = {}
    for key in PHASE_SECONDS:
        seconds = _seconds(phases.get(key))
        if seconds is not None:
            out[key.removesuffix("_s")] = seconds
    return out


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _seconds(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


# The histogram's upper bounds (seconds): a drain's fraction of a second to a cold start's
# quarter of an hour.
STEP_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 900.0)


@dataclass(frozen=True)
class PhaseHistogram:
    """One phase's seconds over the steps seen: how many fell in each of `STEP_BUCKETS`
    (not cumulative; the last count is those above the largest bound), their sum and count."""

    counts: tuple[int, ...] = (0,) * (len(STEP_BUCKETS) + 1)
    total_s: float = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)

    def observed(self, seconds: float) -> PhaseHistogram:
        at = bisect.bisect_left(STEP_BUCKETS, seconds)
        counts = list(self.counts)
        counts[at] += 1
        return PhaseHistogram(tuple(counts), self.total_s + seconds)

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, count at or below it) as Prometheus counts a histogram's buckets,
        the last bound infinite."""
        bounds = (*STEP_BUCKETS, math.inf)
        return list(zip(bounds, itertools.accumulate(self.counts), strict=True))


def observe_steps(
    before: Mapping[str, PhaseHistogram], events: Iterable[Event]
) -> dict[str, PhaseHistogram]:
    """`before` with each step event's phases observed, by phase."""
    out = dict(before)
    for event in step_events(events):
        for phase, seconds in phase_seconds(event).items():
            out[phase] = out.get(phase, PhaseHistogram()).observed(seconds)
    return out


def under_way_words(action: str, phase: str, elapsed_s: float, expected_s: float | None) -> str:
    """The console's status line while a step runs: the action, its phase, the seconds so
    far and, once a step was seen, the last one's total as the time to expect
    (`restart: loading weights… 12 s (last 74 s)`; 45 characters at most for vLLM's phases)."""
    words = f"{action}: {phase}… {elapsed_s:.0f} s"
    return words if expected_s is None else f"{words} (last {expected_s:.0f} s)"


# A step's phases as `vramtop status` names them, vramtop's then vLLM's.
_OWN_WORDS = (
    ("held_s", "held"),
    ("drained_s", "drained"),
    ("stopped_s", "stopped"),
    ("memory_released_s", "memory released"),
    ("launched_s", "launched"),
    ("ready_s", "ready"),
    ("first_served_s", "first served"),
)
_VLLM_WORDS = (("compile_s", "compile"), ("graphs_s", "graphs"))


def step_lines(step: JsonObject) -> list[str]:
    """`last_step` in `vramtop status`'s words: its total and phases on one line
    (`last restart: 80 s (stopped 1.5 s, ready 66 s; vLLM: weights 18 s at 1.30 GB/s,
    compile 43 s)`), then each slow part."""
    phases = step.get("phases")
    phases = phases if isinstance(phases, dict) else {}
    total = _seconds(phases.get("total_s"))
    head = f"last {step.get('action')}" + (f": {total:.0f} s" if total is not None else "")
    own = [f"{w} {_s(s)}" for k, w in _OWN_WORDS if (s := _seconds(phases.get(k))) is not None]
    vllm = []
    weights, rate = _seconds(phases.get("weights_s")), _seconds(phases.get("weights_gb_per_s"))
    if weights is not None:
        vllm.append(f"weights {_s(weights)}" + (f" at {rate:.2f} GB/s" if rate else ""))
    vllm += [f"{w} {_s(s)}" for k, w in _VLLM_WORDS if (s := _seconds(phases.get(k))) is not None]
    parts = ", ".join(own)
    if vllm:
        parts += ("; " if parts else "") + "vLLM: " + ", ".join(vllm)
    result = step.get("result")
    if isinstance(result, str) and result != "ok":
        head += f", {result.replace('_', ' ')}"
    lines = [f"{head} ({parts})" if parts else head]
    message = step.get("message")
    if result != "ok" and isinstance(message, str) and message:
        lines.append(f"  {message}")
    return lines + [f"slow: {w}" for w in _list(step.get("slow_parts")) if isinstance(w, str)]


def _s(seconds: float) -> str:
    """Seconds as a person reads them: a tenth under 10 s, whole ones above."""
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
