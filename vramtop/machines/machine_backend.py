"""The two machines the console and `--once` run against: the real one and the simulated one.

Both are the same `MachineBackend`: a `Sampler` (GPU probe + scraper + log) plus, when vramtop
may act on the server, a `Supervisor`. Only their parts differ: NVML or the simulated GPU, a
user profile or the demo profile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vramtop.core.adaptive_words import AdaptiveState
from vramtop.core.events import EventName, ServerAction
from vramtop.core.headroom.live import live_headroom_inputs
from vramtop.core.json_types import JsonObject
from vramtop.core.model import Rates, ServerState
from vramtop.core.remedy import FlagChange, RelaunchPrecheck
from vramtop.core.sample_facts import relaunch_refusal
from vramtop.core.vllm import args as vllm_args
from vramtop.machines.interface import LOG_TAIL, Frame
from vramtop.machines.live_machine import LiveMachine, live_machine
from vramtop.machines.sampler import Sampler
from vramtop.outcomes import ActionResult, ProgressCallback
from vramtop.session.live import LiveSession
from vramtop.session.normal_store import NormalRateStore

if TYPE_CHECKING:
    # pydantic comes with a profile: watching a URL reads none before its first frame.
    from vramtop.config import Profile

    # Imported where a profile needs one: watching a URL (`--once --url`) never acts, and
    # the supervisor brings httpx and psutil.
    from vramtop.supervisor.action_events import ActionDone
    from vramtop.supervisor.service import Supervisor

log = logging.getLogger(__name__)

# How often the housekeeping step runs at the least (`MachineBackend.keep_house`); a tick
# that finds something to settle runs it at once.
HOUSEKEEPING_S = 5.0
# How often a tick looks again for an adaptive guard's state (`MachineBackend.adaptive_state`).
ADAPTIVE_READ_S = 1.0

LOG_ELSEWHERE = "started outside vramtop: its output goes elsewhere · attach --log PATH shows it"
NO_PROFILE = (
    "vramtop is only watching this server. To let it start and restart vLLM, import your "
    "launch script: vramtop import launch.sh"
)


@dataclass
class DemoHooks:
    """What only the simulated machine can do."""

    toggle_call: Callable[[], bool]
    call_on: Callable[[], bool]
    shutdown: Callable[[bool], None]  # stop_server -> None: ends the load, maybe the world


class MachineBackend:
    """A `Backend` over a sampler and an optional supervisor."""

    recorded = False  # a live machine: its findings are happening now
    finished = False  # it never ends by itself
    cannot_act = NO_PROFILE

    def __init__(
        self,
        *,
        sampler: Sampler,
        supervisor: Supervisor | None,
        demo: DemoHooks | None = None,
        wsl: bool = False,
        asked_by: str = "command",
    ) -> None:
        self.sampler = sampler
        # Who asks for this backend's actions, as the lasting timeline says: a command
        # (record, export), a key where the console built it, the guard for its decisions.
        self.asked_by = asked_by
        self.supervisor = supervisor
        self._demo = demo
        self.demo = demo is not None
        self.wsl = wsl
        self.profile_name = supervisor.name if supervisor else None
        # The console starts the server on mount (in a worker, showing progress) when set.
        self.autostart = False
        self.call_on = False  # demo: a simulated video call is on (as of the last tick)
        self._session = LiveSession(log_lines=sampler.log_lines, normal_store=NormalRateStore())
        self._housekeeper: threading.Thread | None = None
        self._outside_budget: int | None = None  # what the latest sample's split counted
        self._house_due = threading.Event()  # set by a tick that found something to settle
        self._closed = threading.Event()
        # The adaptive guard's state as last read, and when (monotonic; None: never).
        self.adaptive_read_s = ADAPTIVE_READ_S
        self._adaptive: AdaptiveState | None = None
        self._adaptive_read_at: float | None = None
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

    def samples_now(self) -> float:
        """Now on the samples' clock (the `t` of samples and events)."""
        return self.sampler.now()

    @property
    def session(self) -> LiveSession:
        """The live session every tick feeds: its diagnosis, its events, its recording."""
        return self._session

    @property
    def url(self) -> str | None:
        return self.sampler.url

    def housekeeping(self) -> None:
        """One housekeeping step: the server's record settled against what is really there
        (a crash noticed, an interrupted start or stop, an automatic restart due). It may
        take seconds (ending a crashed server's tree, waiting for its memory), so it is
        never part of `tick`: `keep_house` runs it on a thread of its own."""
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

    def keep_house(self, interval_s: float = HOUSEKEEPING_S) -> None:
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

    def tick(self, log_limit: int = LOG_TAIL) -> Frame:
        """Read every source once; the new sample and what the console shows beside it.
        Reads only: a stop or a housekeeping step under way on another thread never holds
        it up."""
        # The split's desktop headroom and the what-ifs' count one figure for what the server
        # holds beyond its budget: the one the diagnosis measured so far.
        self._outside_budget = self.session.diagnoser.outside_budget_bytes
        sample = self.sampler.tick(self._outside_budget)
        if self._demo is not None:
            # Asked here, in the tick's worker thread: the console only reads the frame.
            self.call_on = self._demo.call_on()
        supervisor = self.supervisor
        if self._housekeeper is not None and supervisor and supervisor.settling() is not None:
            self._house_due.set()
        session = self.session
        session.observe(sample)
        return Frame(
            sample=sample,
            findings=tuple(session.findings()),
            events=tuple(session.events()),
            log_lines=tuple(self.log_lines(log_limit)) if log_limit > 0 else (),
            log_notice=self.log_notice(),
            headroom_inputs=live_headroom_inputs(sample, self._outside_budget),
            normal=Rates(generation_tps=session.normal_generation_tps()),
            normal_rate=session.normal_rate(),
            call_on=self.call_on,
            adaptive=self.adaptive_state(),
            throughput=session.throughput(),
            outside_budget_bytes=session.diagnoser.outside_budget_bytes,
            spill=session.spill_evidence(),
        )

    def log_notice(self) -> str | None:
        """Why the server's output cannot be shown, when it cannot: an attached server whose
        stdout and stderr are not files (none was given to attach --log)."""
        if self.supervisor is None or self.supervisor.log_path is not None:
            return None
        return LOG_ELSEWHERE

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

    def adaptive_state(self) -> AdaptiveState | None:
        """The budgets of a guard running adaptively for this profile (None: none runs), read
        on the tick's thread at most once every `adaptive_read_s`, the frames between keeping
        the last answer. Without the guard's state file (no adaptive guard ever ran for this
        profile) that costs one stat; with one, the actor lock's holder is asked first, so
        the file of a guard that is no longer running says nothing (`read_guard_state`)."""
        name = self.profile_name
        if name is None:
            return None
        now = time.monotonic()
        last = self._adaptive_read_at
        if last is not None and now - last < self.adaptive_read_s:
            return self._adaptive
        self._adaptive_read_at = now
        self._adaptive = _read_adaptive(name)
        return self._adaptive

    def _planned(self, name: str, detail: JsonObject) -> None:
        self.session.action(self.sampler.now(), name, dict(detail))

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
        if precheck is None:
            precheck = self._relaunch_precheck
        return supervisor.relaunch(
            change,
            progress=progress,
            precheck=precheck,
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
            self.session.action(
                self.sampler.now(), done.name, {**done.detail, "result": done.outcome.value}
            )

    def _relaunch_precheck(self, change: FlagChange) -> str | None:
        """vLLM's startup checks against the machine as last sampled, before the old server
        is stopped: a relaunch vLLM would refuse leaves the server serving."""
        latest = self.sampler.timeline.latest
        if latest is None:
            return None
        return relaunch_refusal(latest, change, self._outside_budget)

    def log_lines(self, limit: int = LOG_TAIL) -> list[str]:
        return self.sampler.log_lines(limit)

    def toggle_call(self) -> bool:
        if self._demo is None:
            return False
        self.call_on = self._demo.toggle_call()
        return self.call_on

    def close(self, stop_server: bool) -> None:
        self._closed.set()
        self._house_due.set()  # the housekeeping thread ends now, not at its next step
        if stop_server and self.supervisor is not None:
            self._planned("stop", {"reason": "quit"})
            self.supervisor.stop(asked_by=self.asked_by)
        if self._demo is not None:
            self._demo.shutdown(stop_server)
        self.sampler.close()
        self.session.close()


def _read_adaptive(profile: str) -> AdaptiveState | None:
    # Imported here: a backend without a profile never reads it (the supervisor package
    # brings httpx and psutil).
    from vramtop.supervisor.actor import guard_state_path, read_guard_state

    try:
        guard_state_path(profile).stat()
    except OSError:
        return None  # no adaptive guard ever wrote its state here
    try:
        return AdaptiveState.from_json(read_guard_state(profile))
    except OSError:  # the lock unreadable: nothing to say, never a failed tick
        return None


def live_backend(
    profile: Profile | None,
    url: str | None,
    api_key_env: str | None,
    windows: bool = True,
    gpu_probe: str = "auto",
) -> MachineBackend:
    """The real machine (see live_machine.py): the profile's server, or just a URL to watch."""
    return backend_over(
        live_machine(profile, url, api_key_env, windows=windows, gpu_probe=gpu_probe)
    )


def backend_over(machine: LiveMachine) -> MachineBackend:
    """The backend over the real machine's parts."""
    return MachineBackend(sampler=machine.sampler, supervisor=machine.supervisor, wsl=machine.wsl)
