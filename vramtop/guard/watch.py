"""The guard's watch: the runner's ticks into news, the lasting timeline and the policies'
decisions, and the relaunches those decisions take, on a thread of their own so that the
sampling goes on while a server restarts.

Time: the policies count in the samples' clock (each sample's `t`); what others read (the
lasting timeline, the adaptive state) is stamped by the one wall clock the loop passes in.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from vramtop.core.guard.coordinator import Door, GuardConfig, GuardPolicy
from vramtop.core.guard.decisions import (
    ACTED,
    DONE,
    DOWN,
    NOTED,
    SKIPPED,
    STARTED,
    STOPPED,
    UP,
    WAITED,
    Action,
    Decision,
)
from vramtop.core.model import Sample, ServerState
from vramtop.core.news import action_news, finding_closed, finding_opened
from vramtop.core.remedy import FlagChange, RelaunchOrder, RemedyAction
from vramtop.core.secrets import mask_line
from vramtop.core.server_events import EventName, ServerAction
from vramtop.core.vllm import args as vllm_args
from vramtop.guard.others import TimelineNews, asked_by_a_person, told_open_kinds
from vramtop.machines.headless_runner import TickNews
from vramtop.machines.interface import ServerControl
from vramtop.outcomes import Outcome
from vramtop.session.finding_events import GUARD_TOLD, record_findings
from vramtop.supervisor.actor import write_guard_state

if TYPE_CHECKING:
    from vramtop.core.findings import Finding
    from vramtop.event_log import EventLog
    from vramtop.guard.choices import GuardSettings
    from vramtop.notify import Notifier
    from vramtop.session.live import LiveSession

log = logging.getLogger(__name__)

GUARD_EVENT = EventName.GUARD
# How long the guard, asked to stop, waits for a relaunch it started to answer.
ACTION_WAIT_S = 120.0


def say(words: str) -> None:
    """One line for the journal (systemd) or the terminal."""
    print(f"vramtop guard: {words}", file=sys.stderr, flush=True)


class Guarded(ServerControl, Protocol):
    """What the watch asks of the machine it guards: the server control, and the profile's
    record and session beside it (the frames come to it from the runner, not from here)."""

    @property
    def profile_name(self) -> str | None: ...

    @property
    def profile_argv(self) -> tuple[str, ...]:
        """The command line the profile launches."""
        ...

    @property
    def session(self) -> LiveSession | None: ...

    def server_state(self) -> ServerState | None:
        """The profile's server as its record says now (None without a profile)."""
        ...

    def housekeeping(self) -> None:
        """One housekeeping pass that settles the server's record against what is really there."""
        ...

    def close(self, stop_server: bool) -> None: ...


class Watch:
    """What the guard does with each tick. `wall`: the Unix time it stamps what others read
    by (the lasting timeline, the adaptive state); the policies count in the samples'."""

    def __init__(
        self,
        backend: Guarded,
        notifier: Notifier,
        settings: GuardSettings,
        timeline: EventLog,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.backend = backend
        self._wall = wall
        self.notifier = notifier
        self.settings = settings
        self.timeline = timeline
        self.name = backend.profile_name or "default"
        outside = _outside_flags(list(backend.profile_argv)) if settings.adaptive else None
        self.policy = GuardPolicy(
            GuardConfig(
                auto_remedy=settings.auto_remedy, adaptive=outside, settle_s=settings.settle_s
            )
        )
        self._action: threading.Thread | None = None
        self._answer: tuple[str, str] | None = None  # the running relaunch's result, message
        self._adaptive_said: object = None
        # When the adaptive budget last stepped down and up (Unix time): `--once --json`.
        self._down_wall: float | None = None
        self._up_wall: float | None = None
        self._last_t = 0.0  # the latest sample's time
        # Findings a console recorded open before it handed over (kind: when, Unix time).
        self._told_open: dict[str, float] = {}
        self._told_until: float | None = None  # (in the samples' clock)
        self._pending_wall: float | None = None  # since when an action is pending (Unix time)
        self._news = TimelineNews(timeline, since=wall())  # what others write from now on

    def begin(self) -> None:
        """Start the server when it is not running, and housekeeping beside the ticks. A
        start that fails is said (and sent) and the guard goes on watching: the diagnosis
        names why (a launch that could not run, memory at startup), and a guard that exited
        would only be restarted by systemd into the same failure."""
        backend = self.backend
        try:
            self._told_open = told_open_kinds(self.timeline.read())
        except OSError:
            log.warning("the lasting timeline cannot be read", exc_info=True)
        backend.housekeeping()
        state = backend.server_state()
        if backend.autostart or state in (ServerState.STOPPED, ServerState.CRASHED):
            say(f"starting the server of profile {self.name}")
            result = backend.start()
            if not result.ok:
                say(f"the server did not start: {result.message}")
                self.notifier.send(action_news("start", "failed", reason=result.message))
        backend.run_housekeeping()
        modes = [
            f"auto remedy {'between turns' if self.settings.auto_remedy else 'off'}",
            f"adaptive, settle {self.settings.settle_s:g} s"
            if self.settings.adaptive
            else "adaptive off",
            f"notifying {self.notifier.reach}",
        ]
        guarding = f"guarding profile {self.name} ({'; '.join(modes)})"
        say(guarding)
        self._record(None, Decision(self._last_t, STARTED, guarding))
        self._publish()
        return None

    def end(self, why: str) -> None:
        """Leave (`why`: asked to, or the samples kept failing): a relaunch under way is given
        its time to answer, and the leaving is a timeline event."""
        action = self._action
        if action is not None and action.is_alive():
            say("waiting for the relaunch under way to answer")
            action.join(ACTION_WAIT_S)
        answer, self._answer = self._answer, None
        if answer is not None:  # said before the guard leaves, not lost with it
            for decision in self.policy.finished(self._last_t, *answer):
                self._tell(self._last_t, decision)
            self._publish()
        self._record(None, Decision(self._last_t, STOPPED, why))
        self.notifier.close()
        self.backend.close(stop_server=False)

    # -- each tick -------------------------------------------------------------------------
    def on_tick(self, news: TickNews) -> None:
        sample = news.frame.sample
        self._last_t = sample.t
        policy = self.policy
        opened = tuple(f for f in news.opened if not self._told_already(f, sample))
        for finding in opened:
            self.notifier.send(finding_opened(finding, plan=self._plan(finding)))
        for finding in news.closed:
            self.notifier.send(finding_closed(finding))
        self._record_findings(opened, news.closed)
        decisions: list[Decision] = self._people(sample.t)
        answer, self._answer = self._answer, None
        if answer is not None:
            decisions += policy.finished(sample.t, *answer)
        door = _door(sample) if policy.door_needed(sample.t) else None
        decisions += policy.observe(
            sample,
            news.frame.findings,
            outside_budget_bytes=news.frame.outside_budget_bytes,
            door=door,
        )
        if door is None and policy.pending() is not None:
            # Pending from this sample on: a door that holds requests need not wait a sample.
            decisions += policy.door_answers(_door(sample))
        for decision in decisions:
            self._tell(sample.t, decision)
            if decision.decision == ACTED and decision.action is not None:
                self._act(decision.action)
        if policy.pending() is None:
            self._pending_wall = None
        elif self._pending_wall is None:
            self._pending_wall = self._wall()
        self._publish()

    def _told_already(self, finding: Finding, sample: Sample) -> bool:
        """Whether a console that acted before this guard took over already told `finding`:
        the lasting timeline has its kind open, told by a console while the server the guard
        finds ran (one started later, or an earlier guard's telling, is not what the person
        saw). Its news is not sent again, nor its opening written again; its closing is the
        guard's to tell. Only for the findings the guard sees open in its first
        `TOLD_GRACE_S`: later ones are new."""
        t = sample.t
        if self._told_until is None:
            self._told_until = t + TOLD_GRACE_S
        if t > self._told_until:
            self._told_open.clear()
        told_at = self._told_open.pop(finding.kind, None)
        started = sample.info.started_at if sample.info is not None else None
        if told_at is None or started is None or told_at < started:
            return False
        say(f"{finding.kind} is open: a console told it before the guard took over")
        return True

    def _people(self, t: float) -> list[Decision]:
        """What a person asked for the profile (a key in a console, a command: another
        process) since the last look: a pending automatic action that became pending before
        it gives way (`cancelled`, which says why); otherwise the guard notes it, in its
        output and the timeline."""
        decisions: list[Decision] = []
        for event in self._news.take():
            what = asked_by_a_person(event)
            if what is None:
                continue
            since = self._pending_wall
            if since is not None and event.t >= since and self.policy.pending() is not None:
                self._pending_wall = None
                asked_by = event.detail.get("asked_by")
                decisions += self.policy.person_acted(t, f"a {event.name} ({asked_by})")
            else:
                decisions.append(Decision(t, NOTED, f"a person acted: {what}"))
        return decisions

    def _plan(self, finding: Finding) -> str | None:
        remedy = finding.remedy
        if not self.settings.auto_remedy or remedy.budget is None:
            return None
        if remedy.action != RemedyAction.RELAUNCH:
            return None
        return f"Relaunching at {remedy.budget:.2f} between agent turns."

    def _record_findings(self, opened: tuple[Finding, ...], closed: tuple[Finding, ...]) -> None:
        if not opened and not closed:
            return
        record_findings(self.timeline, self._wall(), opened, closed, told_by=GUARD_TOLD)

    def _tell(self, t: float, decision: Decision) -> None:
        """The decision as a `guard` event (the session's and the lasting timeline's), a
        line for the journal, and news. Its why may carry a relaunch's message (vLLM's words):
        masked, as every action's message is, before it is written or sent."""
        decision = replace(decision, why=mask_line(decision.why))
        self._record(t, decision)
        say(f"{decision.decision}: {decision.why}")
        action = decision.action
        if decision.decision == DONE and decision.result == "ok" and action is not None:
            if action.step == DOWN:
                self._down_wall, self._up_wall = self._wall(), None
            elif action.step == UP:
                self._up_wall = self._wall()
        if decision.decision in (WAITED, NOTED):
            # Waiting is not news: the person hears of the relaunch when it begins (often in
            # the same second: the door holds requests) or that it was skipped, and why. Nor
            # is a person's own action, told back to them.
            return
        result = decision.result if decision.decision == DONE else None
        self.notifier.send(
            action_news(
                ServerAction.RELAUNCH,
                result or _NEWS_RESULT.get(decision.decision, decision.decision),
                finding=action.finding if action is not None else None,
                gpu_memory_utilization=action.flags.budget if action is not None else None,
                reason=decision.why,
            )
        )

    def _record(self, t: float | None, decision: Decision) -> None:
        """The decision as a `guard` event: in the lasting timeline, and in the session's at
        `t` (the samples' clock; None: the lasting timeline's alone)."""
        detail = decision.detail()
        session = self.backend.session
        if session is not None and t is not None:
            session.action(t, GUARD_EVENT, detail)
        self.timeline.append(self._wall(), GUARD_EVENT, detail)

    def _act(self, action: Action) -> None:
        """Relaunch with the action's flags on a thread; its answer is taken at the next
        tick."""
        backend = self.backend

        def relaunch() -> None:
            try:
                result = backend.relaunch(RelaunchOrder(action.flags))
            except Exception as exc:  # a bug must not leave the policy waiting forever
                log.exception("the guard's relaunch failed")
                self._answer = ("failed", str(exc))
                return
            # Set where the relaunch ended; none: it never reached the supervisor.
            outcome = result.outcome or Outcome.of(result, changed=False)
            self._answer = (outcome.value, result.message)

        self._action = threading.Thread(target=relaunch, name="guard-relaunch", daemon=True)
        self._action.start()

    def _publish(self) -> None:
        """The adaptive state, for `--once --json`, whenever it changes."""
        state = self.policy.adaptive_state()
        if state is None:
            return
        said = (state.outside, state.during, self._down_wall, self._up_wall)
        if said == self._adaptive_said:
            return
        self._adaptive_said = said
        write_guard_state(
            self.name,
            outside=state.outside,
            during=state.during,
            down=self._down_wall,
            up=self._up_wall,
        )


_NEWS_RESULT: dict[str, str] = {WAITED: "waiting", ACTED: "relaunching", SKIPPED: "skipped"}
# How long after the guard's first sample a finding it sees open may be one a console told.
TOLD_GRACE_S = 60.0


def _door(sample: Sample) -> Door:
    """The front door's requests in flight as this tick's sample read them (the sampler asks
    the door each tick); none where the profile has no door or it did not answer."""
    return Door(sample.door.in_flight if sample.door is not None else None)


def _outside_flags(argv: list[str]) -> FlagChange | None:
    """The profile's own budget and --max-model-len: the flags outside calls."""
    try:
        util = vllm_args.gpu_memory_utilization(argv)
        length = vllm_args.max_model_len(argv)
    except ValueError:
        return None
    return FlagChange(util if util is not None else 0.9, length)
