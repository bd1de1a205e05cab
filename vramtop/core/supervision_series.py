"""The series of what looks after the server beside vLLM: its front door, its steps (starts,
restarts, relaunches, counted and the latest of each) and the profile's guard. Pure, as the
rest of the exposition (`core/exposition.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from vramtop.core.adaptive_words import AdaptiveState
from vramtop.core.model import DoorReading
from vramtop.core.series import Series, add
from vramtop.core.step_report import StepCounts, UnderWay


@dataclass(frozen=True)
class GuardView:
    """The profile's guard as the console knows it: `running` while it holds the guard lock;
    `auto_remedy` whether it relaunches a collapse on its own (None: its lock does not say);
    `adaptive` its budgets where it runs adaptively (None: it does not)."""

    running: bool
    auto_remedy: bool | None = None
    adaptive: AdaptiveState | None = None


def door_series(door: DoorReading | None) -> list[Series]:
    """The front door's figures, where one answered this sample (else none at all)."""
    if door is None:
        return []
    out: list[Series] = []
    add(out, "vramtop_door_in_flight", door.in_flight)
    add(out, "vramtop_door_held", door.held)
    add(out, "vramtop_door_requests_total", door.served, result="served")
    add(out, "vramtop_door_requests_total", door.failed, result="failed")
    for metric, p50, p95 in (
        ("vramtop_door_ttft_seconds", door.ttft_p50_s, door.ttft_p95_s),
        ("vramtop_door_e2e_seconds", door.e2e_p50_s, door.e2e_p95_s),
    ):
        add(out, metric, p50, quantile="0.5")
        add(out, metric, p95, quantile="0.95")
    add(out, "vramtop_door_decode_tokens_per_second", door.decode_tps_p50, quantile="0.5")
    add(out, "vramtop_door_longest_hold_seconds", door.longest_hold_s)
    return out


def step_series(steps: StepCounts | None) -> list[Series]:
    """The steps counted by kind and who asked, and the latest of each kind: when, how long,
    whether it ended as asked. None (no profile): nothing."""
    if steps is None:
        return []
    out = [
        Series("vramtop_steps_total", float(n), (("kind", kind), ("asked_by", asked_by)))
        for (kind, asked_by), n in sorted(steps.counted.items())
    ]
    for kind, last in sorted(steps.latest.items()):
        out.append(
            Series(
                "vramtop_last_step_timestamp_seconds",
                last.t,
                (("kind", kind), ("asked_by", last.asked_by), ("result", last.result or "")),
            )
        )
        add(out, "vramtop_last_step_seconds", last.total_s, kind=kind)
    return out


def under_way_series(under_way: UnderWay | None, now: float | None) -> list[Series]:
    """The action under way on the server, as its seconds so far at `now` (Unix time): the
    record's state alone says `stopped`, then `starting`, during another process's restart."""
    if under_way is None or now is None:
        return []
    seconds = under_way.seconds(now)
    if seconds is None:
        return []
    return [Series("vramtop_action_under_way_seconds", seconds, (("action", under_way.action),))]


def guard_series(guard: GuardView | None) -> list[Series]:
    """Whether a guard runs for the profile, and where one does: whether it acts on its own
    and its adaptive budgets and step (each only where known)."""
    if guard is None:
        return []
    out = [Series("vramtop_guard_running", 1.0 if guard.running else 0.0)]
    if not guard.running:
        return out
    if guard.auto_remedy is not None:
        out.append(Series("vramtop_guard_auto_remedy", 1.0 if guard.auto_remedy else 0.0))
    state = guard.adaptive
    if state is not None:
        add(out, "vramtop_guard_adaptive_budget_ratio", state.outside, budget="outside")
        add(out, "vramtop_guard_adaptive_budget_ratio", state.during, budget="during")
        out.append(Series("vramtop_guard_adaptive_stepped_down", 1.0 if state.in_call else 0.0))
    return out
