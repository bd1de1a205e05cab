"""vram_contention from memory alone: what the memory shows when no rate can be judged.

With no normal rate (a first run opened in the middle of a call) the token rate says nothing:
9 tok/s may be this model's speed. The memory can still show the squeeze directly. Under WSL2
the Windows side does: the desktop's programs hold more VRAM than the server's budget leaves
them, and part of the WSL VM's GPU memory sits in system memory. Without it, a per-process
split does: the desktop holds clearly more than the budget leaves it, which it can only have
taken from the server (which holds that much less than its budget), or the server's buffers
were seen evicted into GTT (AMD). Either is enough to name the collapse, with a `confidence`
that says no rate confirmed it. A derived split cannot show this (it never lets the desktop
exceed its allowance), so without the Windows side or a per-process split the rule stays
silent and the console says the rate cannot be judged yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramtop.core.budget import budget_bytes, outside_budget
from vramtop.core.diagnosis.squeeze_facts import MemoryOnlyFacts, SplitOnlyFacts
from vramtop.core.diagnosis.suggested_budget import DesktopShare, collapse_remedy
from vramtop.core.findings import Evidence, Ladder, Report, Severity
from vramtop.core.model import GIB, GpuDevice, Sample, SplitMethod
from vramtop.core.snapshot import server_util
from vramtop.core.windows.prose import cite_spill
from vramtop.core.windows.spill import SPILL_THRESHOLD_BYTES, SpillEvidence

NO_NORMAL_RATE = "memory evidence, no normal rate"


@dataclass(frozen=True)
class MemoryEvidence:
    """The Windows side's view of the squeeze (WSL2)."""

    desktop_bytes: int  # what the desktop's programs hold in VRAM (Windows' counters)
    headroom_bytes: int  # what the server's budget leaves them
    vm_shared_bytes: int  # the WSL VM's GPU memory in system memory
    vm_dedicated_bytes: int
    spill: SpillEvidence | None  # a rise seen since the start, when there was one


@dataclass(frozen=True)
class SplitEvidence:
    """A per-process split's view of the squeeze: the desktop past what the budget leaves it
    (taken from the server), or the server's buffers evicted into GTT."""

    desktop_bytes: int
    headroom_bytes: int
    server_bytes: int | None  # what the server holds now
    budget_bytes: int
    spill: SpillEvidence | None  # AMD's GTT: the server's buffers seen evicted


def memory_evidence(
    s: Sample, spill: SpillEvidence | None, outside_budget_bytes: int | None = None
) -> MemoryEvidence | SplitEvidence | None:
    """The squeeze as the memory shows it this second (the Windows side where it was read,
    else a per-process split), or None. `spill`: the server's memory seen spilled."""
    reading = s.windows
    if reading is None or reading.error is not None:
        return split_evidence(s, spill, outside_budget_bytes)
    if reading.wsl_vm is None:
        return None
    allowance = headroom_bytes(s, outside_budget_bytes)
    if allowance is None:
        return None  # the budget's allowance is not known
    desktop = reading.desktop_bytes
    vm = reading.wsl_vm
    spilled = spill is not None or vm.shared_bytes >= SPILL_THRESHOLD_BYTES
    if desktop <= allowance or not spilled:
        return None
    return MemoryEvidence(desktop, allowance, vm.shared_bytes, vm.dedicated_bytes, spill)


def split_evidence(
    s: Sample, spill: SpillEvidence | None, outside_budget_bytes: int | None
) -> SplitEvidence | None:
    """The squeeze as a per-process split shows it: the desktop clearly past what the budget
    leaves it (by the spill threshold: more than an error in the outside-budget figure), or
    a spill; None for a derived split, which cannot show it."""
    over = desktop_over_headroom(s, outside_budget_bytes)
    split = s.split
    if over is None or split is None or split.desktop_bytes is None:
        return None
    if over < SPILL_THRESHOLD_BYTES and spill is None:
        return None
    budget = split.budget_bytes or 0
    return SplitEvidence(
        split.desktop_bytes, split.desktop_bytes - over, split.server_bytes, budget, spill
    )


def headroom_bytes(s: Sample, outside_budget_bytes: int | None) -> int | None:
    """What the server's budget leaves the desktop: the split's own figure where the sample
    carries it, else derived from what every recording has (the card's total and the budget,
    recorded as bytes or as the server's --gpu-memory-utilization), with what the server holds
    outside its budget (`outside_budget_bytes`, measured; None: the estimate). None where the
    budget is not known."""
    split = s.split
    if split is None:
        return None
    if split.headroom_bytes is not None:
        return split.headroom_bytes
    budget = split.budget_bytes
    if budget is None:
        util = server_util(s)
        if util is None or not 0 < util <= 1:
            return None
        budget = budget_bytes(split.total_bytes, util)
    return max(0, split.total_bytes - budget - outside_budget(outside_budget_bytes))


def desktop_over_headroom(s: Sample, outside_budget_bytes: int | None) -> int | None:
    """How far the desktop's share is past what the server's budget leaves it (negative:
    within it), counted with what the server holds outside its budget (`outside_budget_bytes`,
    measured; None: the estimate). None where the split cannot show it: no budget known, or a
    derived split, which by construction never lets the desktop past its allowance."""
    split = s.split
    if (
        split is None
        or split.method in (SplitMethod.DERIVED, SplitMethod.UNKNOWN)
        or split.desktop_bytes is None
        or split.budget_bytes is None
    ):
        return None
    allowance = split.total_bytes - split.budget_bytes - outside_budget(outside_budget_bytes)
    return split.desktop_bytes - allowance


def squeeze_in_memory(
    s: Sample, spill: SpillEvidence | None, outside_budget_bytes: int | None
) -> bool:
    """The memory itself shows the desktop squeezing the server this second, not only a full
    card: the server's memory spilled (the WSL VM's shared memory, AMD's GTT: `spill`), or the
    desktop holds clearly more than the budget leaves it, which it can only have taken from
    the server (by the spill threshold: more than an error in the outside-budget figure)."""
    if spill is not None:
        return True
    over = desktop_over_headroom(s, outside_budget_bytes)
    return over is not None and over >= SPILL_THRESHOLD_BYTES


def memory_report(
    s: Sample, device: GpuDevice, evidence: MemoryEvidence | SplitEvidence, desktop: DesktopShare
) -> Report:
    """What the finding says when memory alone names the collapse."""
    over = evidence.desktop_bytes - evidence.headroom_bytes
    held, allowed = evidence.desktop_bytes / GIB, evidence.headroom_bytes / GIB
    kv = s.server.metrics.kv_cache_usage if s.server and s.server.metrics else None
    facts: MemoryOnlyFacts | SplitOnlyFacts
    if isinstance(evidence, MemoryEvidence):
        observed = [
            f"Windows counters: the desktop's programs hold {held:.2f} GiB of VRAM, "
            f"{over / GIB:.2f} GiB more than the {allowed:.2f} GiB the budget leaves them",
            f"the WSL VM has {evidence.vm_shared_bytes / GIB:.2f} GiB of its GPU memory in "
            "system memory",
        ]
        hypothesis = "decoding is slowed by reads of the spilled memory"
        summary = (
            f"The desktop's programs hold {held:.1f} GiB, more than the {allowed:.1f} GiB "
            f"vLLM's budget leaves them, and {evidence.vm_shared_bytes / GIB:.1f} GiB of "
            "vLLM's memory is in system memory: the desktop is squeezing vLLM."
        )
        facts = MemoryOnlyFacts(
            desktop_bytes=evidence.desktop_bytes,
            desktop_allowance_bytes=evidence.headroom_bytes,
            wsl_vm_shared_bytes=evidence.vm_shared_bytes,
            wsl_vm_dedicated_bytes=evidence.vm_dedicated_bytes,
            kv_cache_usage=kv,
            used_bytes=device.used_bytes,
            total_bytes=device.total_bytes,
            generation_tps=s.rates.generation_tps,
            spill=evidence.spill,
        )
    else:
        observed = []
        if over > 0:
            observed.append(
                f"the desktop holds {held:.2f} GiB of VRAM, {over / GIB:.2f} GiB more than the "
                f"{allowed:.2f} GiB the budget leaves it"
            )
        if evidence.server_bytes is not None:
            observed.append(
                f"vLLM holds {evidence.server_bytes / GIB:.2f} GiB of its "
                f"{evidence.budget_bytes / GIB:.2f} GiB budget"
            )
        hypothesis = "decoding is slowed by reads of memory pushed out of VRAM"
        if over >= SPILL_THRESHOLD_BYTES or evidence.spill is None:
            summary = (
                f"The desktop holds {held:.1f} GiB, more than the {allowed:.1f} GiB vLLM's "
                "budget leaves it: it took the difference from vLLM, and the desktop is "
                "squeezing vLLM."
            )
        else:  # (only the spill shows it: AMD's GTT)
            summary = (
                f"{evidence.spill.rise_bytes / GIB:.1f} GiB of vLLM's memory was moved out of "
                f"VRAM into system memory while the desktop holds {held:.1f} GiB: the desktop "
                "is squeezing vLLM."
            )
        facts = SplitOnlyFacts(
            desktop_bytes=evidence.desktop_bytes,
            desktop_allowance_bytes=evidence.headroom_bytes,
            desktop_over_allowance_bytes=over,
            server_bytes=evidence.server_bytes,
            budget_bytes=evidence.budget_bytes,
            kv_cache_usage=kv,
            used_bytes=device.used_bytes,
            total_bytes=device.total_bytes,
            generation_tps=s.rates.generation_tps,
            spill=evidence.spill,
        )
    observed.append(
        "no normal rate is known yet for this server, so the token rate cannot be judged"
    )
    ladder = Ladder(
        observed=tuple(observed),
        inferred=("the desktop and vLLM are competing for physical VRAM",),
        hypothesis=(f"{hypothesis}; a restart that brings the token rate back would confirm it",),
    )
    return Report(
        severity=Severity.CRITICAL,
        summary=(
            f"{summary} There is no normal rate to compare with yet: a restart that brings "
            "the token rate back would confirm it."
        ),
        evidence=Evidence.of(facts),
        ladder=cite_spill(ladder, evidence.spill),
        remedy=collapse_remedy(s, device, desktop),
        confidence=NO_NORMAL_RATE,
    )
