"""What a person or the guard asks of a machine's server (`ServerControl`): start, stop,
restart and relaunch through the profile's supervisor, each told to the live session, and the
housekeeping that settles the server's record against what is really there.

The half of `MachineBackend` that acts; the other half (machine_backend.py) reads the frames.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import TYPE_CHECKING

from vramtop.core.json_types import JsonObject
from vramtop.core.model import ServerState
from vramtop.core.remedy import FlagChange, RelaunchPrecheck
from vramtop.core.sample_facts import relaunch_refusal
from vramtop.core.server_events import EventName, ServerAction
from vramtop.core.vllm import args as vllm_args
from vramtop.outcomes import ActionResult, ProgressCallback

if TYPE_CHECKING:
    from vramtop.machines.sampler import Sampler
    from vramtop.session.live import LiveSession

    # Imported where a profile needs one: watching a URL (`--once --url`) never acts, and
    # the supervisor brings httpx and psutil.
    from vramtop.supervisor.action_events import ActionDone
    from vramtop.supervisor.service import Supervisor

log = logging.getLogger(__name__)

# How often the housekeeping step runs at the least (`MachineControl.run_housekeeping`); a tick
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
        self._housekeeper: threading.Thread | None = None
        self._house_due = threading.Event()  # set by a tick that found something to settle
        self._closed = threading.Event()
        if supervisor is not None:
            supervisor.tell_actions_to(self._recorded)

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
        """One housekeeping step: the server's record settled against what is really there
        (a crash noticed, an interrupted start or stop, an automatic restart due). It may
        take seconds (ending a crashed server's tree, waiting for its memory), so it is
        never part of `tick`: `run_housekeeping` runs it on a thread of its own."""
        if self.supervisor is not None:
            self.supervisor.housekeeping()
            # A front door that died and was started again (by this step or another vramtop's):
            # the timeline says so (`door_restarted`).
            for _ in range(self.supervisor.door_restarts_since()):
                self._planned(
                    EventName.DOOR_RESTARTED,
                    {
                        "front_door": self.supervisor.profile.front_door,
                        "message": "the front door had died; it was started again",
                    },
                )

    def run_housekeeping(self, interval_s: float = HOUSEKEEPING_S) -> None:
        """Run `housekeeping` on a thread of its own until `close` (again: nothing more):
        now, whenever a tick finds something to settle (a crash, an interrupted start or
        stop, an automatic restart due), and at least every `interval_s`. The ticks read the
        record as it is meanwhile. A thread that woke every second to find a running server
        alive cost more than the tick's own look (`Supervisor.settling`)."""
        if self.supervisor is None or self._housekeeper is not None:
            return

        def loop() -> None:
            while not self._closed.is_set():
                self._house_due.clear()
                try:
                    self.housekeeping()
                except Exception:  # a bug must not end the loop: the next step tries again
                    log.exception("housekeeping failed")
                self._house_due.wait(interval_s)

        self._housekeeper = threading.Thread(target=loop, name="housekeeping", daemon=True)
        self._housekeeper.start()

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
    def profile_flags(self) -> FlagChange | None:
        """The budget and --max-model-len the profile's file launches with (a relaunch not
        saved leaves them; None: no profile, or its budget not readable)."""
        if self.supervisor is None:
            return None
        # Asked on every frame (the way back's offer): parsed once for each command line.
        return _launch_flags(tuple(self.supervisor.file_profile.argv))

    @property
    def settle_s(self) -> float | None:
        return self.supervisor.file_profile.settle_s if self.supervisor is not None else None

    def _planned(self, name: str, detail: JsonObject) -> None:
        self._session.action(self.sampler.now(), name, dict(detail))

    def start(self, progress: ProgressCallback | None = None) -> ActionResult:
        if self.supervisor is None:
            return ActionResult(False, NO_PROFILE)
        return self.supervisor.start(progress=progress, asked_by=self.asked_by)

    def stop(self, progress: ProgressCallback | None = None) -> ActionResult:
        if self.supervisor is None:
            return ActionResult(False, NO_PROFILE)
        self._planned("stop", {"reason": "asked"})
        return self.supervisor.stop(progress=progress, asked_by=self.asked_by)

    def restart(
        self, progress: ProgressCallback | None = None, requests_lost: bool = False
    ) -> ActionResult:
        if self.supervisor is None:
            return ActionResult(False, NO_PROFILE)
        self._planned("restart", {"reason": "asked"})
        return self.supervisor.restart(
            progress=progress, requests_lost=requests_lost, asked_by=self.asked_by
        )

    def relaunch(
        self,
        change: FlagChange,
        progress: ProgressCallback | None = None,
        precheck: RelaunchPrecheck | None = None,
    ) -> ActionResult:
        """The supervisor's relaunch, recorded once it has answered (`_recorded`)."""
        supervisor = self.supervisor
        if supervisor is None:
            return ActionResult(False, NO_PROFILE)

        def as_last_sampled(change: FlagChange) -> str | None:
            """vLLM's startup checks against the machine as last sampled, before the old
            server is stopped: a relaunch vLLM would refuse leaves the server serving."""
            latest = self.sampler.timeline.latest
            if latest is None:
                return None
            return relaunch_refusal(latest, change, self._outside_budget)

        return supervisor.relaunch(
            change,
            progress=progress,
            precheck=precheck or as_last_sampled,
            asked_by=self.asked_by,
        )

    def _recorded(self, done: ActionDone) -> None:
        """An action of the supervisor's, answered, told to this session: a relaunch's
        `relaunch` event carries its `result` (its outcome: "ok", "failed", "rolled_back"),
        and only one whose new server serves closes what the old server had open (a
        vram_contention finding). A relaunch refused before it stopped anything (a
        precheck, a missing key, another vramtop acting) is no event: nothing happened to
        the server. (A stop and a restart are told before they act: `_planned`.)"""
        if done.name == ServerAction.RELAUNCH and done.changed:
            self._session.action(
                self.sampler.now(), done.name, {**done.detail, "result": done.outcome.value}
            )
