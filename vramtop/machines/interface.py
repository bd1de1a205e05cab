"""What the console (and the headless commands) need from the machine, as two narrow parts.

A tick reads a frame (`FrameSource`: `tick` and the facts the header shows beside it); a person
or the guard asks the server (`ServerControl`: start, stop, restart, relaunch, the demo's call).
Each consumer takes the part it needs: the console's reader and the exporter a `FrameSource`,
the console, which does both, a `Backend`. Three implementations: the real machine (NVML + a
supervised or attached vLLM), the simulated machine (`--demo`), both `MachineBackend`s, and a
recording (`ReplayBackend`, which takes `ServerControl`'s own answers: nothing can be done on
it). Every method may block: the console calls them from thread workers, never on the event
loop. Methods never raise for
outside-world failures; they report them in the returned values (`Frame`, `ActionResult`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from vramtop.core.model import Rates, Sample
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.outcomes import ActionResult, ProgressCallback

if TYPE_CHECKING:
    # What a frame carries once it is read: the console's first frame is drawn before any
    # reading, and waits for none of the diagnosis' modules (the backend imports them).
    from vramtop.core.adaptive_words import AdaptiveState
    from vramtop.core.diagnosis.normal_rate import NormalRate
    from vramtop.core.diagnosis.throughput import ThroughputView
    from vramtop.core.findings import Finding
    from vramtop.core.headroom.terms import HeadroomInputs
    from vramtop.core.server_events import Event
    from vramtop.core.step_report import UnderWay
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
    # What the server holds beyond its budget, as the diagnosis measured it so far (None: not
    # measured), and its evidence of memory spilled to system RAM (WSL2), if any.
    outside_budget_bytes: int | None = None
    spill: SpillEvidence | None = None
    # The action under way on the profile's server, by whichever process takes it (another
    # terminal's `vramtop restart`, a guard, an automatic restart, this console's own key):
    # its action lock, read with the frame. None: none, or no profile.
    under_way: UnderWay | None = None


@runtime_checkable
class ReplayControls(Protocol):
    """A recording's playback, as the console's Space and arrow keys move it."""

    def toggle_pause(self) -> bool:
        """Pause, or play on; returns whether paused."""
        ...

    def seek(self, forward: bool) -> bool:
        """Pause and move one recorded sample; False where there is none that way."""
        ...


class FrameSource(Protocol):
    """What a tick reads: the frame, and what the header shows beside it."""

    @property
    def demo(self) -> bool:
        """The simulated machine."""
        ...

    @property
    def recorded(self) -> bool:
        """A recording played back: its findings are not happening now (nothing is told)."""
        ...

    @property
    def wsl(self) -> bool | None:
        """None: not known."""
        ...

    @property
    def profile_name(self) -> str | None:
        """Shown in the header."""
        ...

    @property
    def finished(self) -> bool:
        """A recording reached its end: the clock stops, the last frame stays."""
        ...

    @property
    def session(self) -> LiveSession | None:
        """The live session the ticks feed (its diagnosis, and a recording's writer once
        `record_to` is given one); None where none is kept (a recording)."""
        ...

    def tick(self, log_limit: int = LOG_TAIL) -> Frame:
        """Read every source once; the new sample and everything shown beside it."""
        ...


@dataclass(frozen=True)
class ProfileLaunch:
    """What the profile's file launches with, which a relaunch not saved leaves: its flags
    (the budget and --max-model-len; None: its budget not readable), and its `settle_s`, how
    long the desktop stays back before a call counts as over (the adaptive guard's, and the
    console's way back)."""

    flags: FlagChange | None
    settle_s: float


class ServerControl(Protocol):
    """What a person or the guard asks of the server. Each member's body here is what a
    machine vramtop only watches answers (a recording's `ReplayBackend` derives them): nothing can
    be done, and why."""

    @property
    def can_act(self) -> bool:
        """Whether start, stop, restart and relaunch can do anything here."""
        return False

    @property
    def cannot_act(self) -> str:
        """Why start, stop, restart and relaunch did nothing, where they cannot act."""
        return CANNOT_ACT

    @property
    def front_door(self) -> str | None:
        """The front door the server is behind (its HOST:PORT), None without one: a restart
        there drains the requests in flight and holds new ones, so none is lost."""
        return None

    @property
    def launch_budget(self) -> float | None:
        """The budget the profile launches with (None: not known, or no profile)."""
        return None

    @property
    def profile_launch(self) -> ProfileLaunch | None:
        """What the profile's file launches with, and its settle time (None: no profile)."""
        return None

    @property
    def autostart(self) -> bool:
        """The server is started on mount (in a worker)."""
        return False

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
        self, order: RelaunchOrder, progress: ProgressCallback | None = None
    ) -> ActionResult:
        """Stop, then start with changed flags; its precheck may refuse it before the stop."""
        return ActionResult(False, self.cannot_act)

    def toggle_call(self) -> bool:
        """Demo only: start or end a simulated video call; returns whether a call is now on.
        Raises when the simulated machine cannot be asked (the console says so)."""
        return False

    def run_housekeeping(self) -> None:
        """Settle the server's recorded state against what is really there (a crash, an
        interrupted start or stop, an automatic restart due) on a thread of its own until
        `close`: never part of `tick` (a step may take seconds)."""
        return None  # nothing is supervised here


class Backend(FrameSource, ServerControl, Protocol):
    """The machine the console runs against: it reads frames and acts on the server."""

    def close(self, stop_server: bool) -> None:
        """Leave: stop the server only when asked (the default is to leave it running)."""
        ...
