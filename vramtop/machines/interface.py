"""What the console (and the headless commands) need from the machine, as one interface.

Three implementations: the real machine (NVML + a supervised or attached vLLM), the simulated
machine (`--demo`), both `MachineBackend`s, and a recording (`ReplayBackend`). Every method
may block: the console calls them from thread workers, never on the event loop. Methods never
raise for outside-world failures; they report them in the returned values (`Frame`,
`ActionResult`).

`Backend` is an abstract class whose every member its callers (the console, `record`,
`export`) use: what a machine cannot do has a default here (a recording cannot act, only the
demo has a call, only a live machine keeps a session), so no caller asks whether a member
exists or reaches past the backend for one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from vramtop.core.model import Rates, Sample
from vramtop.core.remedy import FlagChange, RelaunchPrecheck
from vramtop.outcomes import ActionResult, ProgressCallback

if TYPE_CHECKING:
    # What a frame carries once it is read: the console's first frame is drawn before any
    # reading, and waits for none of the diagnosis' modules (the backend imports them).
    from vramtop.core.adaptive_words import AdaptiveState
    from vramtop.core.diagnosis.normal_rate import NormalRate
    from vramtop.core.diagnosis.throughput import ThroughputView
    from vramtop.core.events import Event
    from vramtop.core.findings import Finding
    from vramtop.core.headroom.terms import HeadroomInputs
    from vramtop.core.windows.spill import SpillEvidence
    from vramtop.session.live import LiveSession

# How many of the server's last log lines a frame carries unless asked for another number.
LOG_TAIL = 300
# How many a backend keeps, and what the console's first read asks for: opened on a busy
# server, the last LOG_TAIL lines are request lines that fold into a row or two, and the
# panel would show little else.
LOG_KEPT = 2000
CANNOT_ACT = "vramtop cannot act on this server"


@dataclass(frozen=True)
class Frame:
    """One tick's worth of everything the console shows, read together on the reader's
    thread: the console only renders it."""

    sample: Sample
    findings: tuple[Finding, ...] = ()  # open, the first seen first
    events: tuple[Event, ...] = ()  # the session's, oldest first
    log_lines: tuple[str, ...] = ()  # the tail of the server's log, newest last
    # Why the server's output cannot be shown, when it cannot (an attached server whose
    # output goes to a terminal).
    log_notice: str | None = None
    headroom_inputs: HeadroomInputs | None = None  # the live server's calibrated terms
    normal: Rates | None = None  # the normal rates learned for this server start
    normal_rate: NormalRate | None = None  # the normal decode speed, and where it came from
    call_on: bool = False  # demo: a simulated video call is on
    # The budgets of a guard running adaptively for this profile (None: no such guard).
    adaptive: AdaptiveState | None = None
    # The rates against the normal, worked out once where the sample was diagnosed: what the
    # throughput panel, the banner and the door line draw (None: no sample diagnosed).
    throughput: ThroughputView | None = None


@runtime_checkable
class ReplayControls(Protocol):
    """A recording's playback, as the console's Space and arrow keys move it."""

    def toggle_pause(self) -> bool:
        """Pause, or play on; returns whether paused."""
        ...

    def step(self, forward: bool) -> bool:
        """Pause and move one recorded sample; False where there is none that way."""
        ...


class Backend(ABC):
    """The machine the console runs against."""

    demo: bool = False  # the simulated machine
    # A recording played back: its findings are not happening now (nothing is told of them).
    recorded: bool = False
    wsl: bool | None = None  # None: not known
    profile_name: str | None = None  # shown in the header
    autostart: bool = False  # the console starts the server on mount (in a worker)
    call_on: bool = False  # demo: a simulated video call is on
    # Why start, stop, restart and relaunch did nothing, where they cannot act.
    cannot_act: str = CANNOT_ACT

    @property
    def can_act(self) -> bool:
        """Whether start, stop, restart and relaunch can do anything here."""
        return False

    @property
    def front_door(self) -> str | None:
        """The front door the server is behind (its HOST:PORT), None without one: a restart
        there drains the requests in flight and holds new ones, so none is lost."""
        return None

    @property
    def finished(self) -> bool:
        """A recording reached its end: the clock stops, the last frame stays."""
        return False

    @property
    def launch_budget(self) -> float | None:
        """The budget the profile launches with (None: not known, or no profile)."""
        return None

    @property
    def session(self) -> LiveSession | None:
        """The live session this backend's ticks feed (its diagnosis, and a recording's
        writer once `record_to` is given one); None where it keeps none (a recording)."""
        return None

    @property
    def url(self) -> str | None:
        """The base URL of the vLLM server sampled (None: no server, or a recording)."""
        return None

    def outside_budget_bytes(self) -> int | None:
        """What the server holds beyond its budget, as the diagnosis measured it so far (None:
        not measured). Asked on the thread that ticks: that is the one feeding the diagnosis."""
        return None

    def spill_evidence(self) -> SpillEvidence | None:
        """The diagnosis' evidence of memory spilled to system RAM (WSL2), if any."""
        return None

    @abstractmethod
    def tick(self, log_limit: int = LOG_TAIL) -> Frame:
        """Read every source once; the new sample and everything shown beside it."""

    def framed(self, sample: Sample, log_limit: int) -> Frame:
        """`sample` and everything shown beside it, from this machine's readers below: what
        an implementation's `tick` returns once it has its sample."""
        return Frame(
            sample=sample,
            findings=tuple(self.findings()),
            events=tuple(self.events()),
            log_lines=tuple(self.log_lines(log_limit)) if log_limit > 0 else (),
            log_notice=self.log_notice(),
            headroom_inputs=self.headroom_inputs(),
            normal=self.normal_rates(),
            normal_rate=self.normal_rate(),
            call_on=self.call_on,
            adaptive=self.adaptive_state(),
            throughput=self.throughput(),
        )

    # What a frame carries beside its sample (a machine that has none keeps the default).
    def findings(self) -> list[Finding]:
        return []

    def events(self) -> list[Event]:
        return []

    def log_lines(self, limit: int = LOG_TAIL) -> list[str]:
        return []

    def log_notice(self) -> str | None:
        return None

    def headroom_inputs(self) -> HeadroomInputs | None:
        return None

    def normal_rates(self) -> Rates | None:
        return None

    def normal_rate(self) -> NormalRate | None:
        return None

    def throughput(self) -> ThroughputView | None:
        """The latest sample's rates against the normal (see `core.diagnosis.throughput`)."""
        return None

    def adaptive_state(self) -> AdaptiveState | None:
        """The budgets of a guard running adaptively for this profile, if one runs."""
        return None

    def housekeeping(self) -> None:
        """One step that settles the server's recorded state against what is really there;
        never part of `tick` (it may take seconds)."""
        return None  # nothing is supervised here

    def keep_house(self) -> None:
        """Run `housekeeping` on a thread of its own until `close`."""
        return None  # nothing is supervised here

    def start(self, progress: ProgressCallback | None = None) -> ActionResult:
        return ActionResult(False, self.cannot_act)

    def stop(self, progress: ProgressCallback | None = None) -> ActionResult:
        return ActionResult(False, self.cannot_act)

    def restart(
        self, progress: ProgressCallback | None = None, requests_lost: bool = False
    ) -> ActionResult:
        """`requests_lost`: the person confirmed a restart with requests running."""
        return ActionResult(False, self.cannot_act)

    def relaunch(
        self,
        change: FlagChange,
        progress: ProgressCallback | None = None,
        precheck: RelaunchPrecheck | None = None,
    ) -> ActionResult:
        """Stop, then start with changed flags; `precheck` may refuse it before the stop."""
        return ActionResult(False, self.cannot_act)

    def toggle_call(self) -> bool:
        """Demo only: start or end a simulated video call; returns whether a call is now on.
        Raises when the simulated machine cannot be asked (the console says so)."""
        return False

    @abstractmethod
    def close(self, stop_server: bool) -> None:
        """Leave: stop the server only when asked (the default is to leave it running)."""
