"""The guard's loop: the runner's steps into news, the lasting timeline and the policies'
decisions, and the relaunches those decisions take, on a thread of their own so that the
sampling goes on while a server restarts.

Time: the policies count in the samples' clock. On the simulated machine that clock is the
simulator's (real time × `VRAMTOP_SIM_SPEED`: rates per simulated second) and the guard
samples once a simulated second, so a day of calls plays out in minutes with the waits (10 s
open, 120 s for a turn, the settle) intact.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from vramtop.core.events import EventName, ServerAction
from vramtop.core.guard.coordinator import Door, GuardConfig, GuardPolicy
from vramtop.core.guard.decisions import (
    ACTED,
    DONE,
    DOWN,
    SKIPPED,
    UP,
    WAITED,
    Action,
    Decision,
)
from vramtop.core.model import Sample, ServerState
from vramtop.core.news import OPENED, action_news, finding_closed, finding_opened
from vramtop.core.remedy import FlagChange, RemedyAction
from vramtop.core.secrets import mask_line
from vramtop.core.vllm import args as vllm_args
from vramtop.machines.runner import MAX_FAILURES, Runner, Step
from vramtop.outcomes import ExitCode
from vramtop.sim.protocol import SPEED_ENV
from vramtop.supervisor.actor import GUARD, write_guard_state

if TYPE_CHECKING:
    from vramtop.commands.guard import GuardSettings
    from vramtop.core.events import Event
    from vramtop.core.findings import Finding
    from vramtop.event_log import EventLog
    from vramtop.machines.machine_backend import MachineBackend
    from vramtop.notify import Notifier

log = logging.getLogger(__name__)

GUARD_EVENT = EventName.GUARD
# How long the guard, asked to stop, waits for a relaunch it started to answer.
ACTION_WAIT_S = 120.0


def sim_speed() -> float:
    """The simulated machine's speed (1: real time)."""
    try:
        speed = float(os.environ.get(SPEED_ENV, "1"))
    except ValueError:
        return 1.0
    return speed if speed > 0 else 1.0


def guard_loop(
    backend: MachineBackend,
    notifier: Notifier,
    settings: GuardSettings,
    interval_s: float,
    stop: threading.Event,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], object] | None = None,
) -> int:
    """Guard `backend` until `stop` is set (the caller holds the profile's actor lock); the
    command's exit code. `clock` and `sleep`: the pace's time (default: real time, scaled by
    the simulated machine's speed on it; a test passes a clock it moves and a sleep that
    moves it), in which a sample comes every `interval_s` of the samples' clock."""
    from vramtop.event_log import EventLog

    name = backend.profile_name or "default"
    backend.asked_by = GUARD
    watch = Watch(backend, notifier, settings, EventLog.for_profile(name))
    watch.begin()
    if clock is not None and sleep is not None:
        runner = Runner(backend, interval_s=interval_s, clock=clock, sleep=sleep)
    else:
        # The pace in real seconds: a sample each `interval_s` of the samples' clock.
        speed = sim_speed() if backend.demo else 1.0
        runner = Runner(backend, interval_s=interval_s / speed, sleep=stop.wait)
    try:
        runner.run(stop.is_set, watch.on_step)
    except Exception as exc:
        # Every step of the last MAX_FAILURES failed (each is in the log with its traceback):
        # leave with a reason, for systemd's Restart=on-failure to begin afresh.
        say(f"{MAX_FAILURES} samples in a row failed (the last: {mask_line(str(exc))}); leaving")
        return ExitCode.ERROR
    finally:
        watch.end()
    say("stopped; vLLM keeps running")
    return ExitCode.OK


def say(words: str) -> None:
    """One line for the journal (systemd) or the terminal."""
    print(f"vramtop guard: {words}", file=sys.stderr, flush=True)


class Watch:
    """What the guard does with each step."""

    def __init__(
        self,
        backend: MachineBackend,
        notifier: Notifier,
        settings: GuardSettings,
        timeline: EventLog,
    ) -> None:
        self.backend = backend
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
        # Findings a console recorded open before it handed over (by kind): already told.
        self._told_open: set[str] = set()
        self._told_until: float | None = None  # (in the samples' clock)
        self._pending_wall: float | None = None  # since when an action is pending (Unix time)
        self._timeline_seen: tuple[int, int] | None = None  # its file's size and time, last read

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
        backend.keep_house()
        modes = [
            f"auto remedy {'between turns' if self.settings.auto_remedy else 'off'}",
            f"adaptive, settle {self.settings.settle_s:g} s"
            if self.settings.adaptive
            else "adaptive off",
            f"notifying {self.notifier.reach}",
        ]
        say(f"guarding profile {self.name} ({'; '.join(modes)})")
        self._publish()
        return None

    def end(self) -> None:
        action = self._action
        if action is not None and action.is_alive():
            say("waiting for the relaunch under way to answer")
            action.join(ACTION_WAIT_S)
        answer, self._answer = self._answer, None
        if answer is not None:  # said before the guard leaves, not lost with it
            for decision in self.policy.finished(self._last_t, *answer):
                self._tell(self._last_t, decision)
            self._publish()
        self.notifier.close()
        self.backend.close(stop_server=False)

    # -- each step -------------------------------------------------------------------------
    def on_step(self, step: Step) -> None:
        sample = step.frame.sample
        self._last_t = sample.t
        policy = self.policy
        opened = tuple(f for f in step.opened if not self._told_already(f, sample.t))
        for finding in opened:
            self.notifier.send(finding_opened(finding, plan=self._plan(finding)))
        for finding in step.closed:
            self.notifier.send(finding_closed(finding))
        self._record_findings(opened, step.closed)
        decisions: list[Decision] = self._person_acted(sample.t)
        answer, self._answer = self._answer, None
        if answer is not None:
            decisions += policy.finished(sample.t, *answer)
        door = _door(sample) if policy.door_needed(sample.t) else None
        decisions += policy.observe(
            sample,
            step.frame.findings,
            outside_budget_bytes=self.backend.outside_budget_bytes(),
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
            self._pending_wall = time.time()
        self._publish()

    def _told_already(self, finding: Finding, t: float) -> bool:
        """Whether a console that acted before this guard took over already told `finding`
        (the lasting timeline has its kind open): its news is not sent again, nor its opening
        written again; its closing is the guard's to tell. Only for the findings the guard
        sees open in its first `TOLD_GRACE_S`: later ones are new."""
        if self._told_until is None:
            self._told_until = t + TOLD_GRACE_S
        if t > self._told_until:
            self._told_open.clear()
        if finding.kind not in self._told_open:
            return False
        self._told_open.discard(finding.kind)
        say(f"{finding.kind} is open: the console told it before the guard took over")
        return True

    def _person_acted(self, t: float) -> list[Decision]:
        """A key or a command (another process) acted for the profile since the automatic
        action became pending: that action gives way, and says so."""
        since = self._pending_wall
        if since is None or self.policy.pending() is None:
            return []
        try:
            stat = self.timeline.path.stat()
            seen = (stat.st_size, stat.st_mtime_ns)
            if seen == self._timeline_seen:
                return []  # nothing written since the last look
            self._timeline_seen = seen
            events = self.timeline.read(since=since)
        except OSError:
            return []
        for event in events:
            asked_by = event.detail.get("asked_by")
            if event.name in PERSON_ACTIONS and asked_by in PERSON:
                self._pending_wall = None
                return self.policy.person_acted(t, f"a {event.name} ({asked_by})")
        return []

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
        from vramtop.session.event_log import record_findings

        record_findings(self.timeline, time.time(), opened, closed)

    def _tell(self, t: float, decision: Decision) -> None:
        """The decision as a `guard` event (the session's and the lasting timeline's), a
        line for the journal, and news. Its why may carry a relaunch's message (vLLM's words):
        masked, as every action's message is, before it is written or sent."""
        decision = replace(decision, why=mask_line(decision.why))
        detail = decision.detail()
        session = self.backend.session
        if session is not None:
            session.action(t, GUARD_EVENT, detail)
        self.timeline.append(time.time(), GUARD_EVENT, detail)
        say(f"{decision.decision}: {decision.why}")
        action = decision.action
        if decision.decision == DONE and decision.result == "ok" and action is not None:
            if action.step == DOWN:
                self._down_wall, self._up_wall = time.time(), None
            elif action.step == UP:
                self._up_wall = time.time()
        if decision.decision == WAITED:
            # Waiting is not news: the person hears of the relaunch when it begins (often in
            # the same second: the door holds requests) or that it was skipped, and why.
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

    def _act(self, action: Action) -> None:
        """Relaunch with the action's flags on a thread; its answer is taken at the next
        step."""
        backend = self.backend

        def relaunch() -> None:
            before = _relaunch_events(backend)
            try:
                result = backend.relaunch(action.flags)
            except Exception as exc:  # a bug must not leave the policy waiting forever
                log.exception("the guard's relaunch failed")
                self._answer = ("failed", str(exc))
                return
            after = _relaunch_events(backend)
            if result.ok:
                outcome = "ok"
            elif result.rolled_back:
                outcome = "rolled_back"
            else:
                outcome = "failed" if after > before else "refused"
            self._answer = (outcome, result.message)

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
# A person's actions, as the lasting timeline records them (`asked_by`).
PERSON_ACTIONS = tuple(ServerAction)
PERSON = ("key", "command")


def _door(sample: Sample) -> Door:
    """The front door's requests in flight as this step's sample read them (the sampler asks
    the door each tick); none where the profile has no door or it did not answer."""
    return Door(sample.door.in_flight if sample.door is not None else None)


def told_open_kinds(events: list[Event]) -> set[str]:
    """The finding kinds whose last `finding` event in the lasting timeline is an opening:
    open when this guard took over, told by whoever acted before it."""
    last: dict[str, object] = {}
    for event in events:
        if event.name == "finding":
            last[str(event.detail.get("kind"))] = event.detail.get("change")
    return {kind for kind, change in last.items() if change == OPENED}


def _outside_flags(argv: list[str]) -> FlagChange | None:
    """The profile's own budget and --max-model-len: the flags outside calls."""
    try:
        util = vllm_args.gpu_memory_utilization(argv)
        length = vllm_args.max_model_len(argv)
    except ValueError:
        return None
    return FlagChange(util if util is not None else 0.9, length)


def _relaunch_events(backend: MachineBackend) -> int:
    return sum(1 for e in backend.events() if e.name == EventName.RELAUNCH)
