"""The adaptive guard's budgets in words, as the throughput panel says them:
"budget: 0.93 outside calls, 0.85 during; down 14:02, up 14:41".

The guard writes its state (`vramtop/supervisor/actor.py`: `write_guard_state`) as a JSON
object: `outside` (the profile's budget, the one outside calls), `during` (the one it stepped
down to for the last call; null before any), `down` and `up` (Unix times of its last step down
and up; null: not yet, and `up` is null again while the call it stepped down for lasts).
`AdaptiveState.from_json` reads that object; `budget_words` says it. Pure: the local clock
time of a step is the caller's `hhmm` (the console's is the local time zone's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

LABEL = "budget: "
SETTLING = "up when the desktop has settled"


@dataclass(frozen=True)
class AdaptiveState:
    """What a guard running adaptively for the profile last wrote (Unix times)."""

    outside: float
    during: float | None = None
    down: float | None = None
    up: float | None = None

    @property
    def in_call(self) -> bool:
        """Stepped down for a call, not back up yet."""
        return self.down is not None and (self.up is None or self.up < self.down)

    @classmethod
    def from_json(cls, data: Mapping[str, object] | None) -> AdaptiveState | None:
        """The state from `read_guard_state`'s object; None when there is none, or its
        `outside` budget is not a number (a file this version cannot read says nothing)."""
        if data is None:
            return None
        outside = _number(data.get("outside"))
        if outside is None:
            return None
        return cls(
            outside,
            _number(data.get("during")),
            _number(data.get("down")),
            _number(data.get("up")),
        )


def budget_variants(state: AdaptiveState, hhmm: Callable[[float], str]) -> list[str]:
    """The line in as much detail as a width holds, the fullest first, the last within 36
    columns (the panel's width in an 80-column terminal): both budgets and the last steps'
    times in each; while the call lasts, that the step up waits for the desktop."""
    outside = f"{state.outside:.2f}"
    if state.down is None:  # no call stepped down for yet
        return [
            f"{LABEL}{outside} outside calls; no step down yet",
            f"{LABEL}{outside} outside calls",
        ]
    during = f"{state.during:.2f}" if state.during is not None else "—"
    down = hhmm(state.down)
    if state.in_call or state.up is None:
        return [
            f"{LABEL}{outside} outside calls, {during} during; down {down}, {SETTLING}",
            f"{LABEL}{outside} outside calls, {during} during; down {down}, up: settling",
            f"{LABEL}{outside} outside calls, {during} during since {down}",
            f"{LABEL}{during} since {down}, then {outside}",
        ]
    up = hhmm(state.up)
    return [
        f"{LABEL}{outside} outside calls, {during} during; down {down}, up {up}",
        f"{LABEL}{outside} outside calls, {during} during {down}–{up}",
        f"{LABEL}{outside}, {during} for {down}–{up}",
    ]


def budget_words(state: AdaptiveState, hhmm: Callable[[float], str]) -> str:
    """The fullest line: "budget: 0.93 outside calls, 0.85 during; down 14:02, up 14:41"."""
    return budget_variants(state, hhmm)[0]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
