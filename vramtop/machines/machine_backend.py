"""The two machines the console and `--once` run against: the real one and the simulated one.

Both are the same `MachineBackend`: a `Sampler` (GPU probe + scraper + log) plus, when vramtop
may act on the server, a `Supervisor`. Only their parts differ: NVML or the simulated GPU, a
user profile or the demo profile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vramtop.core.adaptive_words import AdaptiveState
from vramtop.core.headroom.live_inputs import live_headroom_inputs
from vramtop.core.model import Rates
from vramtop.machines.interface import LOG_TAIL, Frame
from vramtop.machines.live_machine import LiveMachine, live_machine
from vramtop.machines.machine_control import MachineControl
from vramtop.machines.sampler import Sampler
from vramtop.session.live import LiveSession
from vramtop.session.normal_store import NormalRateStore

if TYPE_CHECKING:
    # pydantic comes with a profile: watching a URL reads none before its first frame.
    from vramtop.config import Profile
    from vramtop.core.step_report import UnderWay

    # Imported where a profile needs one: watching a URL (`--once --url`) never acts, and
    # the supervisor brings httpx and psutil.
    from vramtop.supervisor.service import Supervisor


# How often a tick looks again for an adaptive guard's state (`MachineBackend.adaptive_state`).
ADAPTIVE_READ_S = 1.0

LOG_ELSEWHERE = "started outside vramtop: its output goes elsewhere · attach --log PATH shows it"


@dataclass
class DemoHooks:
    """What only the simulated machine can do."""

    toggle_call: Callable[[], bool]
    call_on: Callable[[], bool]
    shutdown: Callable[[bool], None]  # stop_server -> None: ends the load, maybe the world


class MachineBackend(MachineControl):
    """A `Backend` over a sampler and an optional supervisor: the frames its ticks read,
    beside the server control it is (`MachineControl`)."""

    recorded = False  # a live machine: its findings are happening now
    finished = False  # it never ends by itself

    def __init__(
        self,
        *,
        sampler: Sampler,
        supervisor: Supervisor | None,
        demo: DemoHooks | None = None,
        wsl: bool = False,
        asked_by: str = "command",
    ) -> None:
        super().__init__(
            sampler=sampler,
            supervisor=supervisor,
            session=LiveSession(log_lines=sampler.log_lines, normal_store=NormalRateStore()),
            asked_by=asked_by,
        )
        self._demo = demo
        self.demo = demo is not None
        self.wsl = wsl
        self.profile_name = supervisor.name if supervisor else None
        self.call_on = False  # demo: a simulated video call is on (as of the last tick)
        # The adaptive guard's state as last read, and when (monotonic; None: never).
        self.adaptive_read_s = ADAPTIVE_READ_S
        self._adaptive: AdaptiveState | None = None
        self._adaptive_read_at: float | None = None

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
        if self.housekeeper.running and supervisor and supervisor.settling() is not None:
            self.housekeeper.wake()
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
            under_way=self.under_way(),
        )

    def log_notice(self) -> str | None:
        """Why the server's output cannot be shown, when it cannot: an attached server whose
        stdout and stderr are not files (none was given to attach --log)."""
        if self.supervisor is None or self.supervisor.log_path is not None:
            return None
        return LOG_ELSEWHERE

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

    def under_way(self) -> UnderWay | None:
        """The action under way on the profile's server (None: none, or no profile), read on
        the tick's thread: one open of its action lock's file, and one read while it is held."""
        if self.supervisor is None:
            return None
        from vramtop.supervisor.under_way import action_under_way

        return action_under_way(self.supervisor.name)  # (unreadable: None, never a failed tick)

    def log_lines(self, limit: int = LOG_TAIL) -> list[str]:
        return self.sampler.log_lines(limit)

    def toggle_call(self) -> bool:
        if self._demo is None:
            return False
        self.call_on = self._demo.toggle_call()
        return self.call_on

    def close(self, stop_server: bool) -> None:
        self.housekeeper.close()
        if stop_server and self.supervisor is not None:
            self._told.planned("stop", {"reason": "quit"})
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
