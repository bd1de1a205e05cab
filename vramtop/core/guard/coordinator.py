"""One pending automatic action for both policies: it waits for a moment between agent turns
(up to `TURN_WAIT_S`, then it is skipped; where the front door answers, it acts at once: the
door holds the agent's next request and lets those in flight finish), never while a start or
stop runs, and gives way to a person. The automatic remedy relaunches at most
`PER_HOUR` times an hour; the adaptive budget at most once down and once up per call, with
the settle between (two calls in ten minutes are four relaunches, each wanted)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vramtop.core.findings import Finding
from vramtop.core.guard.adaptive import AdaptiveBudget, AdaptiveState
from vramtop.core.guard.auto_remedy import AutoRemedy
from vramtop.core.guard.decisions import (
    ACTED,
    ADAPTIVE,
    CANCELLED,
    DONE,
    SKIPPED,
    WAITED,
    Action,
    Decision,
    Moment,
)
from vramtop.core.guard.hourly_limit import HourlyLimit
from vramtop.core.model import Sample, ServerState
from vramtop.core.remedy import FlagChange

TURN_WAIT_S = 120.0
PER_HOUR = 3


@dataclass(frozen=True)
class GuardConfig:
    """What the guard may do on its own: `auto_remedy` (relaunch a collapse between turns),
    `adaptive` (the profile's flags, stepped down for calls; None: off), `settle_s`."""

    auto_remedy: bool = False
    adaptive: FlagChange | None = None
    settle_s: float = 300.0
    turn_wait_s: float = TURN_WAIT_S
    per_hour: int = PER_HOUR


@dataclass(frozen=True)
class Door:
    """The front door as the latest sample saw it: None for `in_flight` when there is none
    (or it did not answer)."""

    in_flight: int | None = None

    @property
    def holds(self) -> bool:
        return self.in_flight is not None


class GuardPolicy:
    """Samples in, decisions out. `acting()` is the action the guard runs now (None: none);
    `finished` takes its result."""

    def __init__(self, config: GuardConfig) -> None:
        self.config = config
        self.remedy = AutoRemedy() if config.auto_remedy else None
        self.adaptive = (
            AdaptiveBudget(config.adaptive, config.settle_s) if config.adaptive else None
        )
        self._pending: Action | None = None
        self._pending_since = 0.0
        self._pending_start: float | None = None  # which server start the wait began on
        self._acting: Action | None = None
        # The hourly limit is the automatic remedy's: the adaptive budget is bounded by its
        # calls (one step down and one up each, a settle between them).
        self._limit = HourlyLimit(config.per_hour)
        self._last: Moment | None = None  # the latest sample's moment

    def acting(self) -> Action | None:
        return self._acting

    def pending(self) -> Action | None:
        return self._pending

    def door_needed(self, t: float) -> bool:
        """Whether the next `observe` needs to know of the front door: an action is pending (a
        door that holds requests lets it act without waiting for a quiet moment)."""
        return self._pending is not None

    def door_answers(self, door: Door) -> list[Decision]:
        """The front door answered after this sample's `observe` made an action pending: a
        door that holds requests lets it act at once, a sample earlier."""
        if self._pending is None or self._last is None or not door.holds:
            return []
        return self._gate(self._last, door)

    def adaptive_state(self) -> AdaptiveState | None:
        return self.adaptive.state() if self.adaptive is not None else None

    def observe(
        self,
        s: Sample,
        findings: Sequence[Finding],
        *,
        outside_budget_bytes: int | None = None,
        door: Door | None = None,
    ) -> list[Decision]:
        m = self._last = Moment.of(s)
        if self._acting is not None:
            return []  # the relaunch runs: its own result says what happened
        decisions: list[Decision] = []
        proposals: list[Action] = []
        if self.adaptive is not None:
            action, said = self.adaptive.propose(s, m, outside_budget_bytes)
            decisions += said
            if action is not None:
                proposals.append(action)
        if self.remedy is not None:
            action, said = self.remedy.propose(m.t, findings)
            decisions += said
            if action is not None:
                proposals.append(action)
        door = door or Door()
        decisions += self._pend(m, proposals, door)
        if self._pending is not None:
            decisions += self._gate(m, door)
        return decisions

    def _pend(self, m: Moment, proposals: list[Action], door: Door) -> list[Decision]:
        pending = self._pending
        if pending is not None:
            gone = self._gone(m, pending)
            if gone is not None:
                self._pending = None
                return [gone]
            # The same step's newest flags (the desktop's share still moving) replace the old.
            same = [p for p in proposals if (p.policy, p.step) == (pending.policy, pending.step)]
            if same:
                self._pending = same[0]
            return []
        if not proposals:
            return []
        action = proposals[0]
        refused = (
            self._limit.refusal(m.t, action.flags.words()) if action.policy != ADAPTIVE else None
        )
        if refused is not None:
            self._give_up(action)
            return [Decision(m.t, SKIPPED, refused, action)]
        self._pending, self._pending_since, self._pending_start = action, m.t, m.started_at
        if (m.between_turns or door.holds) and not m.busy and m.serving:
            return []  # acted on at once below
        waiting = _waiting_words(m, self.config.turn_wait_s)
        return [Decision(m.t, WAITED, f"{action.why}; {waiting}", action)]

    def _gone(self, m: Moment, pending: Action) -> Decision | None:
        """Why the pending action is no longer the guard's to take, if it is not."""
        if self._pending_start is not None and m.started_at not in (None, self._pending_start):
            self._give_up(pending)
            return Decision(
                m.t, CANCELLED, "the server was restarted meanwhile by someone else", pending
            )
        if m.state is ServerState.STOPPED:
            self._give_up(pending)
            return Decision(m.t, CANCELLED, "the server was stopped meanwhile", pending)
        policy = self.remedy if pending.policy != ADAPTIVE else self.adaptive
        return policy.still_wanted(m.t, pending) if policy is not None else None

    def _gate(self, m: Moment, door: Door) -> list[Decision]:
        action = self._pending
        assert action is not None
        if m.busy or not m.serving:
            return []
        if m.between_turns:
            return [
                self._act(m, action, f"no request running: relaunching at {action.flags.words()}")
            ]
        if door.holds:
            # The door holds the agent's next request and lets those in flight finish before
            # the server stops: no quiet moment is needed.
            why = (
                f"the front door holds the agent's next request and lets the {door.in_flight} "
                f"in flight finish: relaunching at {action.flags.words()}"
            )
            return [self._act(m, action, why)]
        if m.t - self._pending_since < self.config.turn_wait_s:
            return []
        self._pending = None
        self._give_up(action)
        why = (
            f"no moment without a request running in {self.config.turn_wait_s:.0f} s, and no "
            f"front door holds them: not relaunching at {action.flags.words()} "
            f"({m.running} running)"
        )
        return [Decision(m.t, SKIPPED, why, action)]

    def _act(self, m: Moment, action: Action, why: str) -> Decision:
        self._pending = None
        self._acting = action
        if action.policy != ADAPTIVE:
            self._limit.started(m.t)
        if self.remedy is not None:
            self.remedy.handled(action)
        return Decision(m.t, ACTED, why, action)

    def _give_up(self, action: Action) -> None:
        if action.policy == ADAPTIVE and self.adaptive is not None:
            self.adaptive.skipped(action)
        elif self.remedy is not None:
            self.remedy.handled(action)

    def finished(self, t: float, result: str, message: str) -> list[Decision]:
        """The running action's relaunch answered: `ok`, `rolled_back`, `failed`, or
        `refused` (vLLM's checks refused it before the old server stopped: the server keeps
        serving; no relaunch is counted)."""
        action, self._acting = self._acting, None
        if action is None:
            return []
        if self.adaptive is not None and action.policy == ADAPTIVE:
            self.adaptive.finished(t, action, result)
        if result == "refused":
            if action.policy != ADAPTIVE:
                self._limit.refused()
            return [Decision(t, SKIPPED, f"vLLM would refuse it: {message}", action)]
        words = {
            "ok": f"relaunched at {action.flags.words()}: the new server serves",
            "rolled_back": f"the relaunch at {action.flags.words()} failed and the previous "
            f"flags serve again: {message}",
            "failed": f"the relaunch at {action.flags.words()} failed: {message}",
        }
        return [Decision(t, DONE, words.get(result, message), action, result=result)]

    def person_acted(self, t: float, what: str) -> list[Decision]:
        """A key or a command acts: a pending automatic action gives way, and says so."""
        pending, self._pending = self._pending, None
        if pending is None:
            return []
        self._give_up(pending)
        return [
            Decision(t, CANCELLED, f"{what} was asked: the automatic relaunch gives way", pending)
        ]


def _waiting_words(m: Moment, turn_wait_s: float) -> str:
    """What a pending action waits for at `m`."""
    if m.busy:
        return f"waiting: the server is {m.state}"
    running = "requests are" if m.running is None else f"{m.running} running"
    return f"waiting up to {turn_wait_s:.0f} s for a moment between agent turns ({running})"
