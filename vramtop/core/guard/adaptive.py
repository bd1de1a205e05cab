"""The adaptive budget: the profile's budget is the one for outside calls; when the desktop's
share rises towards what that budget leaves it, step down to the collapse remedy's flags
(between turns, before the spill slows decoding), and once the desktop has been back within
that allowance for `settle_s`, step back up. One step down and one up per call (a call: one
rise of the desktop, until it has settled again)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from vramtop.core import sample_facts as read
from vramtop.core.budget import GIB, MIB
from vramtop.core.desktop_share import GROWING_BYTES_PER_S, TREND_WINDOW_S, growth_rate
from vramtop.core.diagnosis.collapse import DesktopShare, collapse_remedy
from vramtop.core.guard.decisions import (
    ADAPTIVE,
    DOWN,
    SKIPPED,
    UP,
    Action,
    Decision,
    Moment,
)
from vramtop.core.model import Sample
from vramtop.core.remedy import FlagChange

# The rise is called this far short of the allowance: the call's memory arrives within a few
# seconds, and a relaunch must come before it spills vLLM's memory, not after.
RISE_MARGIN_BYTES = 256 * MIB
SETTLE_S = 300.0
# A budget within this of the profile's counts as the profile's (vLLM reports two decimals).
SAME_UTIL = 0.005

OUTSIDE = "outside"  # at the profile's budget, no call
CALL = "call"  # a call rose: the step down is wanted (or was skipped, or failed)
DOWN_STATE = "down"  # stepped down: waiting for the desktop to settle


@dataclass(frozen=True)
class AdaptiveState:
    """What `--once --json`'s `adaptive` object says: the two budgets, when the last step
    down and up happened (the samples' clock; None: not yet)."""

    outside: float
    during: float | None
    down_t: float | None
    up_t: float | None
    phase: str


def desktop_rising(desktop: int, allowance: int) -> bool:
    """Whether the desktop's share is near (within RISE_MARGIN_BYTES of) or beyond the
    allowance the outside-call budget leaves it: a call still on, or rising."""
    return desktop > allowance - RISE_MARGIN_BYTES


class Settling:
    """The rule for a call being over: the desktop back within the outside-call allowance,
    held for `settle_s` (the samples' clock). The adaptive guard steps back up by it, and the
    console offers the way back by it."""

    def __init__(self, settle_s: float = SETTLE_S) -> None:
        self.settle_s = settle_s
        self.since: float | None = None  # when the desktop was last seen back within it

    def reset(self) -> None:
        self.since = None

    def settled(self, t: float, rising: bool) -> bool:
        """Whether, with this sample at `t` (`rising`: `desktop_rising`), the desktop has
        been back for `settle_s`."""
        if rising:
            self.since = None
            return False
        if self.since is None:
            self.since = t
        return t - self.since >= self.settle_s


class AdaptiveBudget:
    """Follows the desktop's share sample by sample; proposes the step down and the step up."""

    def __init__(self, outside: FlagChange, settle_s: float = SETTLE_S) -> None:
        """`outside`: the profile's own flags (its budget is known: vLLM's default where the
        command line gives none)."""
        if outside.budget is None:
            raise ValueError("the budget outside calls is not known")
        self.outside = outside
        self.outside_budget = outside.budget
        self.settle_s = settle_s
        self._settling = Settling(settle_s)
        self.phase = OUTSIDE
        self.during: float | None = None
        self.down_t: float | None = None
        self.up_t: float | None = None
        self._stepped_down = False  # this call's step down was taken (or tried)
        self._base: int | None = None  # the desktop's share before the call rose
        self._base_programs: dict[str, int] = {}
        self._peak = 0
        self._history: deque[tuple[float, int]] = deque()
        self._previous: tuple[int, dict[str, int]] | None = None

    def state(self) -> AdaptiveState:
        return AdaptiveState(self.outside_budget, self.during, self.down_t, self.up_t, self.phase)

    def propose(
        self, s: Sample, m: Moment, outside_budget_bytes: int | None
    ) -> tuple[Action | None, list[Decision]]:
        """The step wanted now (None: none), and decisions to say."""
        allowance = m.headroom_at(self.outside_budget)
        if m.desktop is None or allowance is None or m.budget is None or not m.serving:
            return None, []
        programs = _programs(s)
        if self.phase == OUTSIDE and m.budget < self.outside_budget - SAME_UTIL:
            # Found below the profile's budget (a guard restarted while stepped down).
            self._enter_down(m.t, m.budget, stepped=False)
        rising = desktop_rising(m.desktop, allowance)
        if self.phase == OUTSIDE:
            if not rising:
                self._previous = (m.desktop, programs)
                return None, []
            self._start_call(m, programs)
        self._track(m)
        if self.phase == CALL:
            return self._step_down(s, m, allowance, programs, outside_budget_bytes)
        return self._step_up(m, allowance, rising)

    def _start_call(self, m: Moment, programs: dict[str, int]) -> None:
        self.phase = CALL
        self._stepped_down = False
        base, base_programs = self._previous or (m.desktop or 0, programs)
        self._base, self._base_programs = base, base_programs
        self._peak = 0
        self._history.clear()

    def _track(self, m: Moment) -> None:
        desktop = m.desktop or 0
        self._peak = max(self._peak, desktop)
        self._history.append((m.t, desktop))
        while self._history and self._history[0][0] < m.t - TREND_WINDOW_S:
            self._history.popleft()

    def _step_down(
        self,
        s: Sample,
        m: Moment,
        allowance: int,
        programs: dict[str, int],
        outside_budget_bytes: int | None,
    ) -> tuple[Action | None, list[Decision]]:
        if self._stepped_down:
            return self._settled_without_step(m, allowance)
        device = read.primary(s)
        if device is None:
            return None, []
        # Stepping down for the call: its share is taken as still growing (the rise is seen
        # in its first second, before a trend can be read), so the remedy leaves room for a
        # call's whole demand above where the desktop stood before it rose. Its peak is the
        # one seen: a peak made up would read to the remedy as a desktop already back down.
        growth = max(growth_rate(list(self._history)), GROWING_BYTES_PER_S)
        share = DesktopShare(self._base, self._peak, outside_budget_bytes, growth)
        remedy = collapse_remedy(s, device, share)
        util = remedy.budget
        if remedy.action != "relaunch" or util is None or m.budget is None or util >= m.budget:
            self._stepped_down = True
            why = remedy.why or "no smaller budget still serves"
            return None, [Decision(m.t, SKIPPED, f"no step down for this call: {why}")]
        flags = FlagChange(util, remedy.max_model_len)
        why = (
            f"the desktop's share rose to {(m.desktop or 0) / GIB:.2f} GiB, near the "
            f"{allowance / GIB:.2f} GiB that {self.outside_budget:.2f} leaves it"
            f"{_grown(programs, self._base_programs)}: stepping down to {flags.words()} for "
            "the call"
        )
        return Action(ADAPTIVE, DOWN, flags, why), []

    def _settled_without_step(
        self, m: Moment, allowance: int
    ) -> tuple[Action | None, list[Decision]]:
        """A call whose step down was skipped or failed ends once the desktop settles."""
        if self._settled(m, allowance, desktop_rising(m.desktop or 0, allowance)):
            self.phase = OUTSIDE
            self._previous = None
        return None, []

    def _step_up(
        self, m: Moment, allowance: int, rising: bool
    ) -> tuple[Action | None, list[Decision]]:
        if not self._settled(m, allowance, rising):
            return None, []
        flags = self.outside
        why = (
            f"the desktop has stayed within the {allowance / GIB:.2f} GiB that "
            f"{flags.budget:.2f} leaves it for {self.settle_s:.0f} s: stepping back up to "
            f"{flags.words()}"
        )
        return Action(ADAPTIVE, UP, flags, why), []

    def _settled(self, m: Moment, allowance: int, rising: bool) -> bool:
        return self._settling.settled(m.t, rising)

    def _enter_down(self, t: float, util: float, stepped: bool) -> None:
        self.phase = DOWN_STATE
        self.during = util
        self._settling.reset()
        self._stepped_down = True
        if stepped:
            self.down_t = t

    def finished(self, t: float, action: Action, result: str) -> None:
        """The step's relaunch answered (`ok`, `rolled_back`, `failed`, or `refused` before
        it stopped anything)."""
        if action.step == DOWN:
            if result == "ok" and action.flags.budget is not None:
                self._enter_down(t, action.flags.budget, stepped=True)
            else:
                self._stepped_down = True  # this call's step down is used up
                self._settling.reset()
        elif action.step == UP:
            if result == "ok":
                self.phase = OUTSIDE
                self.up_t = t
                self._previous = None
            else:
                self._settling.reset()  # settle again before the next try

    def skipped(self, action: Action) -> None:
        """The step was not taken (no quiet moment, the hourly limit)."""
        if action.step == DOWN:
            self._stepped_down = True
        else:
            self._settling.reset()

    def still_wanted(self, t: float, action: Action) -> Decision | None:
        return None  # a call that rose is answered even when its share dips meanwhile


def _programs(s: Sample) -> dict[str, int]:
    """The desktop's programs by name and memory: Windows' own list on WSL2, else the card's
    processes that are not the server's."""
    if s.windows is not None and s.windows.available and s.windows.desktop:
        return {p.name: p.dedicated_bytes for p in s.windows.desktop}
    device = read.primary(s)
    if device is None or not device.processes:
        return {}
    server = set(s.info.pids) if s.info else set()
    if s.info is not None and s.info.pid is not None:
        server.add(s.info.pid)
    out: dict[str, int] = {}
    for p in device.processes:
        if p.pid not in server:
            out[p.name] = out.get(p.name, 0) + p.used_bytes
    return out


def _grown(now: dict[str, int], before: dict[str, int]) -> str:
    """` (ms-teams.exe +2.50 GiB)`: the program that grew most, where one grew by 64 MiB."""
    if not now:
        return ""
    name, grew = max(((n, b - before.get(n, 0)) for n, b in now.items()), key=lambda x: x[1])
    return f" ({name} +{grew / GIB:.2f} GiB)" if grew >= 64 * MIB else ""
