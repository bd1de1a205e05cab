"""What a person or the guard asks of a machine's server (`ServerControl`): start, stop,
restart and relaunch through the profile's supervisor, each told to the live session, and the
housekeeping that settles the server's record against what is really there.

The half of `MachineBackend` that acts; the other half (machine_backend.py) reads the frames.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from vramtop.core import sample_facts as read
from vramtop.core.json_types import JsonObject
from vramtop.core.model import ServerState
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.core.server_events import EventName, ServerAction
from vramtop.core.vllm import args as vllm_args
from vramtop.machines.interface import ProfileLaunch
from vramtop.outcomes import ActionResult, ProgressCallback

if TYPE_CHECKING:
    from vramtop.machines.sampler import Sampler
    from vramtop.session.live import LiveSession

    # Imported where a profile needs one: watching a URL (`--once --url`) never acts, and
    # the supervisor brings httpx and psutil.
    from vramtop.supervisor.action_events import ActionDone
    from vramtop.supervisor.service import Supervisor

log = logging.getLogger(__name__)

# How often housekeeping runs at the least (`MachineControl.run_housekeeping`); a tick
# that finds something to settle runs it at once.
HOUSEKEEPING_S = 5.0

NO_PROFILE = (
    "vramtop is only watching this server. To let it start and restart vLLM, import your "
    "launch script: vramtop import launch.sh"
)


@functools.lru_cache(maxsize=4)
def _launch_flags(argv: tuple[str, ...]) -> FlagChange | None:
    """The budget and --max-model-len `argv` launches with (None: its budget not readable)."""
    try:
        return FlagChange(vllm_args.gpu_memory_utilization(argv), vllm_args.max_model_len(argv))
    except ValueError:
        return None


class MachineControl:
    """`ServerControl` over an optional supervisor (none: watching only, every action says
    how to let vramtop act), its actions told to `session` on the samples' clock."""

    cannot_act = NO_PROFILE

    def __init__(
        self,
        *,
        sampler: Sampler,
        supervisor: Supervisor | None,
        session: LiveSession,
        asked_by: str = "command",
    ) -> None:
        self.sampler = sampler
        self.supervisor = supervisor
        self._session = session
        # Who asks for this backend's actions, as the lasting timeline says: a command
        # (record, export), a key where the console built it, the guard for its decisions.
        self.asked_by = asked_by
        # The console starts the server on mount (in a worker, showing progress) when set.
        self.autostart = False
        self._outside_budget: int | None = None  # what the latest sample's split counted
        self.housekeeper = HousekeepingThread(self.housekeeping)
        self._told = SessionActions(session, sampler.now)
        if supervisor is not None:
            supervisor.tell_actions_to(self._told.answered)

    @property
    def can_act(self) -> bool:
        return self.supervisor is not None

    @property
    def front_door(self) -> str | None:
        return self.supervisor.profile.front_door if self.supervisor is not None else None

    @property
    def profile_argv(self) -> tuple[str, ...]:
        """The command line the profile launches (none without a profile to act on)."""
        return tuple(self.supervisor.profile.argv) if self.supervisor is not None else ()

    def server_state(self) -> ServerState | None:
        """The profile's server as its record says now (None without a profile)."""
        return self.supervisor.status().state if self.supervisor is not None else None

    def housekeeping(self) -> None:
        """One housekeeping pass: the server's record settled against what is really there
        (a crash noticed, an interrupted start or stop, an automatic restart due). It may
        take seconds (ending a crashed server's tree, waiting for its memory), so it is
        never part of `tick`: `run_housekeeping` runs it on a thread of its own."""
        if self.supervisor is not None:
            self.supervisor.housekeeping()
            # A front door that died and was started again (by this pass or another vramtop's):
            # the timeline says so (`door_restarted`).
            for _ in range(self.supervisor.door_restarts_since()):
                self._told.planned(
                    EventName.DOOR_RESTARTED,
                    {
                        "front_door": self.supervisor.profile.front_door,
                        "message": "the front door had died; it was started again",
                    },
                )

    def run_housekeeping(self, interval_s: float = HOUSEKEEPING_S) -> None:
        """Run `housekeeping` on a thread of its own until `close` (`HousekeepingThread`)."""
        if self.supervisor is not None:
            self.housekeeper.start(interval_s)

    @property
    def launch_budget(self) -> float | None:
        """The budget the profile launches with: a relaunch's once its server serves (the
        file keeps the old one unless it was saved); one that failed leaves it as it was."""
        if self.supervisor is None:
            return None
        try:
            return vllm_args.gpu_memory_utilization(self.supervisor.profile.argv)
        except ValueError:
            return None

    @property
    def profile_launch(self) -> ProfileLaunch | None:
        """What the profile's file launches with (a relaunch not saved leaves it), and its
        settle time; None without a profile."""
        if self.supervisor is None:
            return None
        profile = self.supervisor.file_profile
        # Asked on every frame (the way back's offer): parsed once for each command line.
        return ProfileLaunch(_launch_flags(tuple(profile.argv)), profile.settle_s)

    def start(self, progress: ProgressCallback | None = None) -> ActionResult:
        if self.supervisor is None:
            return ActionResult(False, NO_PROFILE)
        return self.supervisor.start(progress=progress, asked_by=self.asked_by)

    def stop(self, progress: ProgressCallback | None = None) -> ActionResult:
        if self.supervisor is None:
            return ActionResult(False, NO_PROFILE)
        self._told.planned("stop", {"reason": "asked"})
        return self.supervisor.stop(progress=progress, asked_by=self.asked_by)

    def restart(
        self, progress: ProgressCallback | None = None, requests_lost: bool = False
    ) -> ActionResult:
        if self.supervisor is None:
            return ActionResult(False, NO_PROFILE)
        refused = self._restart_refusal()
        if refused is not None:
            return ActionResult(False, refused)  # before the stop: the server keeps serving
        self._told.planned("restart", {"reason": "asked"})
        return self.supervisor.restart(
            progress=progress, requests_lost=requests_lost, asked_by=self.asked_by
        )

    def relaunch(
        self, order: RelaunchOrder, progress: ProgressCallback | None = None
    ) -> ActionResult:
        """The supervisor's relaunch, told to the session once it has answered. Without a
        precheck of the order's own, vLLM's startup checks against the machine as last
        sampled, before the old server is stopped: a relaunch vLLM would refuse leaves the
        server serving."""
        supervisor = self.supervisor
        if supervisor is None:
            return ActionResult(False, NO_PROFILE)

        def as_last_sampled(change: FlagChange) -> str | None:
            latest = self.sampler.timeline.latest
            if latest is None:
                return None
            return read.relaunch_refusal(latest, change, self._outside_budget)

        if order.precheck is None:
            order = replace(order, precheck=as_last_sampled)
        return supervisor.relaunch(order, progress=progress, asked_by=self.asked_by)

    def _restart_refusal(self) -> str | None:
        """Why vLLM would refuse a restart of the server, serving as last sampled (a call
        holds the memory its budget needs); None where it would start, or where the server
        was not seen serving (crashed, hung: a restart is what it needs, and vLLM checks)."""
        latest = self.sampler.timeline.latest
        # Serving: running, and its metrics read fresh this sample (`read.metrics`).
        if latest is None or read.state(latest) is not ServerState.RUNNING:
            return None
        if read.metrics(latest) is None:
            return None
        try:
            return read.restart_refusal(
                latest, self._outside_budget, self._session.diagnoser.desktop_at_start
            )
        except Exception:  # a check that breaks refuses nothing: vLLM checks anyway
            log.exception("the restart's check failed")
            return None


class HousekeepingThread:
    """`MachineControl.housekeeping` run on a thread of its own until `close` (again:
    nothing more): now, whenever a tick finds something to settle (`wake`: a crash, an
    interrupted start or stop, an automatic restart due), and at least every `interval_s`.
    The ticks read the record as it is meanwhile. A thread that woke every second to find a
    running server alive cost more than the tick's own look (`Supervisor.settling`)."""

    def __init__(self, keep_house: Callable[[], None]) -> None:
        self._keep_house = keep_house
        self._thread: threading.Thread | None = None
        self._due = threading.Event()  # set by a tick that found something to settle
        self._closed = threading.Event()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, interval_s: float) -> None:
        if self._thread is not None:
            return

        def loop() -> None:
            while not self._closed.is_set():
                self._due.clear()
                try:
                    self._keep_house()
                except Exception:  # a bug must not end the loop: the next pass tries again
                    log.exception("housekeeping failed")
                self._due.wait(interval_s)

        self._thread = threading.Thread(target=loop, name="housekeeping", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Something to settle: the next pass runs now."""
        self._due.set()

    def close(self) -> None:
        """The thread ends now, not at its next pass."""
        self._closed.set()
        self._due.set()


class SessionActions:
    """A backend's actions as its live session has them, on the samples' clock (`now`): a
    stop and a restart told before they act (`planned`), a relaunch once it has answered."""

    def __init__(self, session: LiveSession, now: Callable[[], float]) -> None:
        self._session = session
        self._now = now

    def planned(self, name: str, detail: JsonObject) -> None:
        self._session.action(self._now(), name, dict(detail))

    def answered(self, done: ActionDone) -> None:
        """An action of the supervisor's, answered, told to this session: a relaunch's
        `relaunch` event carries its `result` (its outcome: "ok", "failed", "rolled_back"),
        and only one whose new server serves closes what the old server had open (a
        vram_contention finding). A relaunch refused before it stopped anything (a
        precheck, a missing key, another vramtop acting) is no event: nothing happened to
        the server. (A stop and a restart are told before they act: `planned`.)"""
        if done.name == ServerAction.RELAUNCH and done.changed:
            self._session.action(
                self._now(), done.name, {**done.detail, "result": done.outcome.value}
            )
