"""The budget to relaunch at, and the remedy a squeeze's finding offers with it.

`suggest_budget` is the one rule for a suggested budget, whoever names one: a finding's
remedy (`collapse_remedy`, for vram_contention, vram_slowdown and the memory-only rule),
the headroom screen with no finding open and the exported
`vramtop_budget_for_desktop_peak_ratio`. What a caller does not know it leaves out, and
that part of the rule is not applied.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramtop.core import sample_facts as read
from vramtop.core.budget import desktop_headroom_bytes, kv_change, kv_cost, outside_budget
from vramtop.core.desktop_share import (
    CALL_DEMAND_BYTES,
    DesktopDemand,
    Suggestion,
    suggested_budget,
)
from vramtop.core.diagnosis.thresholds import (
    DESKTOP_GROWTH_BYTES,
    DESKTOP_MARGIN_BYTES,
    UNSEEN_DESKTOP_DEMAND_BYTES,
)
from vramtop.core.findings import KvCost, RelaunchFigures, Remedy, RemedyAction
from vramtop.core.model import GIB, GpuDevice, Sample


@dataclass(frozen=True)
class DesktopShare:
    """What the desktop (everything on the card but the server) held since the server started."""

    at_start: int | None
    peak: int | None
    outside_budget: int | None
    """What the server holds beyond its budget (CUDA context, graphs), last seen uncontended."""
    growth_bytes_per_s: float = 0.0
    """The desktop share's recent trend: above 0 while a call's memory still grows."""


def suggest_budget(
    total: int,
    peak: int,
    *,
    outside_budget_bytes: int,
    now: int | None = None,
    smallest_serving: float | None = None,
    squeezed_at: float | None = None,
    at_start: int | None = None,
    growth_bytes_per_s: float = 0.0,
) -> Suggestion:
    """The budget that leaves the desktop its `peak` plus `DESKTOP_MARGIN_BYTES`.

    vLLM's startup checks hold it wherever the caller knows their terms: `now` (the desktop's
    share now) keeps it within the memory a relaunch would find free, `smallest_serving` (the
    smallest budget that still serves one request) keeps it above what vLLM refuses.

    A squeeze seen (a finding open) adds what it showed: `squeezed_at`, the budget the server
    was squeezed at, caps the suggestion below it, and where the desktop never got past what
    that budget left it its visible peak is only what it was allowed, so demand it could not
    show is allowed for (`at_start`: its share at the server's start); `growth_bytes_per_s`,
    its recent trend, allows for the growth still to come.
    """
    headroom_then = (
        desktop_headroom_bytes(total, squeezed_at, outside_budget_bytes)
        if squeezed_at is not None
        else None
    )
    capped = headroom_then is not None and peak <= headroom_then
    demand = DesktopDemand(
        peak=peak,
        now=now,
        growth_bytes_per_s=growth_bytes_per_s,
        unseen=_unseen(peak, at_start) if capped else 0,
        at_start=at_start,
    )
    # The desktop's need may not fit beside the model: never propose a budget vLLM would
    # refuse, even with a shorter --max-model-len.
    return suggested_budget(
        total,
        demand,
        DESKTOP_MARGIN_BYTES,
        outside_budget_bytes=outside_budget_bytes,
        util_now=squeezed_at,
        smallest_serving=smallest_serving,
    )


def _unseen(peak: int, at_start: int | None) -> int:
    """What a desktop that never got past what the server left it may want beyond its peak: a
    call's demand above where it started, less what it was seen to take (the fixed allowance
    where its share at the start is not known)."""
    if at_start is None:
        return UNSEEN_DESKTOP_DEMAND_BYTES
    return max(0, at_start + CALL_DEMAND_BYTES - peak)


def collapse_remedy(s: Sample, device: GpuDevice, desktop: DesktopShare) -> Remedy:
    """Relaunch at the budget that leaves the desktop its peak plus a margin (or a restart)."""
    total = device.total_bytes
    util_now = read.util(s)
    outside = outside_budget(desktop.outside_budget)
    peak = desktop.peak or read.desktop_bytes(s) or 0
    suggestion = suggest_budget(
        total,
        peak,
        outside_budget_bytes=outside,
        now=read.desktop_bytes(s),
        smallest_serving=read.smallest_util_that_serves(s),
        squeezed_at=util_now,
        at_start=desktop.at_start,
        growth_bytes_per_s=desktop.growth_bytes_per_s,
    )
    util = suggestion.budget
    figures = RelaunchFigures(
        desktop_headroom_bytes=suggestion.desktop_headroom_bytes,
        desktop_peak_bytes=peak,
        desktop_margin_bytes=DESKTOP_MARGIN_BYTES,
        unseen_desktop_demand_bytes=suggestion.unseen_bytes,
        desktop_growth_bytes_per_s=round(desktop.growth_bytes_per_s),
        desktop_still_growing=suggestion.growing,
        current_gpu_memory_utilization=util_now,
        leaves_desktop_peak=suggestion.leaves_desktop_need,
    )
    flags = read.flags_at(s, util)
    # The budget cannot hold one request of the current ceiling: vLLM would refuse the
    # start, so the remedy lowers --max-model-len with it.
    lowers = flags is not None and flags.max_model_len is not None
    cost = _kv_cost(s, total, util_now, util)
    words = flags.words() if flags is not None else f"{util:.2f}"
    # While the desktop holds more than when the server started and than the budget leaves it
    # (a call's memory), vLLM's own startup check refuses a restart: only a relaunch helps.
    restart_fails = read.restart_refusal(s, desktop.outside_budget, desktop.at_start) is not None
    action, why = _action(figures, util, s, util_now, desktop.at_start, words, restart_fails)
    if action is RemedyAction.RELAUNCH and cost is not None and cost.kv_pool_bytes is not None:
        # The figures the relaunch dialog, the what-if and `calc` print for this budget.
        pool = f"KV pool {(cost.kv_pool_bytes_after or 0) / GIB:.2f} GiB"
        if cost.kv_cache_tokens is not None:
            pool += f", {cost.kv_cache_tokens_after:,} tokens"
        why += f"; {pool}"
    return Remedy(
        action=action,
        budget=util,
        max_model_len=flags.max_model_len if lowers and flags is not None else None,
        current_max_model_len=flags.current_max_model_len if lowers and flags else None,
        why=why,
        restart_fails=restart_fails and action is RemedyAction.RELAUNCH,
        kv_pool_bytes=cost.kv_pool_bytes if cost is not None else None,
        kv_pool_bytes_after=cost.kv_pool_bytes_after if cost is not None else None,
        relaunch=figures,
        cost=cost,
    )


def _kv_cost(s: Sample, total: int, util_now: float | None, util: float) -> KvCost | None:
    """What the suggestion costs the pool: by the server's calibrated model where it is known
    (the figures the dialog and the what-if print), else in proportion to the budget."""
    now, new = read.predictions(s, util_now, util)
    if now is not None and new is not None:
        return kv_change(now, new)
    m = read.metrics(s)
    cache = m.cache if m else None
    return kv_cost(
        total,
        util_now,
        util,
        cache.kv_cache_memory_bytes if cache else None,
        cache.kv_cache_size_tokens if cache else None,
    )


def _action(
    figures: RelaunchFigures,
    util: float,
    s: Sample,
    util_now: float | None,
    at_start: int | None,
    flag_words: str,
    restart_fails: bool,
) -> tuple[RemedyAction, str]:
    """The action and why, in words (`flag_words`: the relaunch's flags as
    `RelaunchFlags.words` says them; `restart_fails`: vLLM would refuse a restart now)."""
    desktop = read.desktop_bytes(s)
    peak = figures.desktop_peak_bytes
    headroom_gib = figures.desktop_headroom_bytes / GIB
    if util_now is not None and util >= util_now:
        return (
            RemedyAction.RESTART,
            "no smaller budget still serves: restart vLLM once the desktop's load is "
            "gone, or close desktop programs",
        )
    # The call is over when the desktop grew and is back near where it started: a restart alone
    # restores the rate (the field report's 82.8 tok/s), at no KV cost.
    if (
        not restart_fails
        and desktop is not None
        and at_start is not None
        and peak - at_start >= DESKTOP_GROWTH_BYTES
        and desktop - at_start < DESKTOP_GROWTH_BYTES
    ):
        return (
            RemedyAction.RESTART,
            "the desktop's share is back down: restart vLLM now; relaunch at "
            f"{flag_words} to keep the next call from doing it again",
        )
    if figures.desktop_still_growing and figures.leaves_desktop_peak:
        rate = figures.desktop_growth_bytes_per_s * 60 / GIB
        return (
            RemedyAction.RELAUNCH,
            f"the desktop's share is still growing ({rate:+.2f} GiB a minute): relaunch "
            f"at {flag_words} leaves it {headroom_gib:.2f} GiB, room for a call's "
            "memory; or wait until it levels off",
        )
    if not figures.leaves_desktop_peak:
        return (
            RemedyAction.RELAUNCH,
            f"relaunch at {flag_words}, the smallest budget that still "
            f"serves ({headroom_gib:.2f} GiB for the desktop, less than its peak): also close "
            "desktop programs",
        )
    return (
        RemedyAction.RELAUNCH,
        f"relaunch at {flag_words} to leave the desktop its peak plus a "
        f"margin ({headroom_gib:.2f} GiB)",
    )
