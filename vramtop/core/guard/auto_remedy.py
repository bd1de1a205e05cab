"""The automatic remedy: a collapse open for `OPEN_FOR_S` is answered with its own remedy's
relaunch (the flags the banner offers, checked by vLLM's startup rules when it runs), once per
finding."""

from __future__ import annotations

from collections.abc import Sequence

from vramtop.core.findings import VRAM_CONTENTION, Finding, finding_id
from vramtop.core.guard.decisions import (
    AUTO_REMEDY,
    CANCELLED,
    REMEDY,
    SKIPPED,
    Action,
    Decision,
)
from vramtop.core.remedy import FlagChange

# How long a collapse stays open before the guard relaunches: a collapse that a few seconds
# end by themselves (the desktop letting go) needs no relaunch.
OPEN_FOR_S = 10.0


class AutoRemedy:
    """Wants the open collapse's relaunch once it has been open `open_for_s`."""

    def __init__(self, open_for_s: float = OPEN_FOR_S) -> None:
        self.open_for_s = open_for_s
        self._seen: dict[str, float] = {}  # open collapse id -> when the guard saw it open
        self._handled: set[str] = set()  # ids already acted on or skipped

    def propose(
        self, t: float, findings: Sequence[Finding]
    ) -> tuple[Action | None, list[Decision]]:
        """The relaunch wanted now (None: none), and decisions to say (a remedy that cannot be
        applied is skipped once, with why)."""
        open_now = {finding_id(f): f for f in findings if f.kind == VRAM_CONTENTION and f.is_open}
        for key in list(self._seen):
            if key not in open_now:
                del self._seen[key]
        decisions: list[Decision] = []
        for key, finding in open_now.items():
            since = self._seen.setdefault(key, t)
            if key in self._handled or t - since < self.open_for_s:
                continue
            remedy = finding.remedy
            if remedy.action != "relaunch" or remedy.budget is None:
                self._handled.add(key)
                why = remedy.why or "the collapse's remedy is no relaunch"
                decisions.append(Decision(t, SKIPPED, f"no automatic relaunch: {why}"))
                continue
            flags = FlagChange(remedy.budget, remedy.max_model_len)
            held = t - since
            why = (
                f"the desktop has squeezed vLLM's memory for {held:.0f} s: relaunching at "
                f"{flags.words()}, the collapse's remedy"
            )
            return Action(AUTO_REMEDY, REMEDY, flags, why, finding), decisions
        return None, decisions

    def handled(self, action: Action) -> None:
        """The action was taken or skipped: never again for that finding."""
        if action.finding is not None:
            self._handled.add(finding_id(action.finding))

    def still_wanted(self, t: float, action: Action) -> Decision | None:
        """A CANCELLED decision once the collapse the action answers is no longer open."""
        if action.finding is None or finding_id(action.finding) in self._seen:
            return None
        return Decision(t, CANCELLED, "the collapse is over before a quiet moment came", action)
