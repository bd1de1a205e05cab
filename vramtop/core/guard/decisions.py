"""What the guard's policies decide, as values: the action wanted (its flags a `FlagChange`),
each decision (the `guard` event's detail), and the facts of one sample they judge by."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from vramtop.core import sample_facts as read
from vramtop.core.budget import budget_bytes
from vramtop.core.findings import Finding
from vramtop.core.json_types import JsonObject
from vramtop.core.model import Sample, ServerState
from vramtop.core.remedy import FlagChange


class Wanter(StrEnum):
    """Who wants an action: the `guard` event's `policy`."""

    AUTO_REMEDY = "auto_remedy"
    ADAPTIVE = "adaptive"


class GuardStep(StrEnum):
    """Which step an action is: the `guard` event's `step`."""

    REMEDY = "remedy"  # the automatic remedy's relaunch (a collapse's flags)
    DOWN = "down"  # adaptive: to the remedy's flags for a call
    UP = "up"  # adaptive: back to the profile's budget once the call is over


class Decided(StrEnum):
    """The decisions a `guard` event names (its `decision`)."""

    WAITED = "waited"  # an action is wanted; a moment between turns is awaited
    ACTED = "acted"  # the relaunch starts now
    SKIPPED = "skipped"  # not done, and why (no quiet moment, the hourly limit, vLLM refuses)
    CANCELLED = "cancelled"  # no longer wanted (the collapse ended, a person acted first)
    DONE = "done"  # the relaunch answered: its `result` (ok, rolled_back, failed)
    # Not a policy's: what the guard itself says in the timeline.
    NOTED = "noted"  # a person acted (a key in a console, a command), nothing pending
    STARTED = "started"  # the guard began watching the profile (its modes in `why`)
    STOPPED = "stopped"  # the guard left (why: asked to, or its samples kept failing)


# The names the policies and their callers use (each equal to its string in the timeline).
AUTO_REMEDY, ADAPTIVE = Wanter.AUTO_REMEDY, Wanter.ADAPTIVE
REMEDY, DOWN, UP = GuardStep.REMEDY, GuardStep.DOWN, GuardStep.UP
WAITED, ACTED, SKIPPED = Decided.WAITED, Decided.ACTED, Decided.SKIPPED
CANCELLED, DONE = Decided.CANCELLED, Decided.DONE
NOTED, STARTED, STOPPED = Decided.NOTED, Decided.STARTED, Decided.STOPPED


@dataclass(frozen=True)
class Action:
    """A relaunch a policy wants: whose, which step, its flags and why."""

    policy: str  # AUTO_REMEDY or ADAPTIVE
    step: str  # REMEDY, DOWN or UP
    flags: FlagChange
    why: str
    finding: Finding | None = None  # the collapse the automatic remedy answers


@dataclass(frozen=True)
class Decision:
    """One decision at `t` (the samples' clock): the `guard` event and a piece of news."""

    t: float
    decision: str  # WAITED, ACTED, SKIPPED, CANCELLED or DONE
    why: str  # in words, the reason first
    action: Action | None = None
    result: str | None = None  # DONE: the relaunch's result (ok, rolled_back, failed)

    def detail(self) -> JsonObject:
        """The `guard` event's detail: `decision` and `why`, then what it was about."""
        out: JsonObject = {"decision": self.decision, "why": self.why}
        if self.action is not None:
            out["policy"] = self.action.policy
            out["step"] = self.action.step
            out.update(self.action.flags.to_json())
        if self.result is not None:
            out["result"] = self.result
        return out


@dataclass(frozen=True)
class Moment:
    """What one sample says that the policies judge by (None: not known)."""

    t: float
    state: ServerState | None
    serving: bool  # the server answered this sample's scrape
    running: int | None  # requests running now
    waiting: int | None
    budget: float | None  # the server's budget now
    started_at: float | None  # which start of the server this is
    total: int | None
    desktop: int | None
    budget_bytes: int | None  # at `budget`
    headroom: int | None  # what `budget` leaves the desktop

    @classmethod
    def of(cls, s: Sample) -> Moment:
        m = read.metrics(s)
        device = read.primary(s)
        split = s.split
        return cls(
            t=s.t,
            state=read.state(s),
            serving=m is not None,
            running=_count(m.requests_running) if m else None,
            waiting=_count(m.requests_waiting) if m else None,
            budget=read.util(s),
            started_at=s.info.started_at if s.info else None,
            total=device.total_bytes if device else None,
            desktop=read.desktop_bytes(s),
            budget_bytes=split.budget_bytes if split else None,
            headroom=split.headroom_bytes if split else None,
        )

    @property
    def between_turns(self) -> bool:
        """No request running nor waiting: a relaunch now cuts no answer short."""
        return self.running == 0 and not self.waiting

    @property
    def busy(self) -> bool:
        """A start or a stop runs: no automatic action now."""
        return self.state in (ServerState.STARTING, ServerState.STOPPING)

    def headroom_at(self, budget: float) -> int | None:
        """What `budget` would leave the desktop, counted as this sample's split counts its
        own: its headroom, moved by the difference of the two budgets."""
        if self.headroom is None or self.budget_bytes is None or self.total is None:
            return None
        return self.headroom + self.budget_bytes - budget_bytes(self.total, budget)


def _count(value: float | None) -> int | None:
    return None if value is None else round(value)
