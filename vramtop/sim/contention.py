"""The simulated card's contention model: how the desktop takes memory from the CUDA
processes, and what that costs their steps. Pure: allocations and free bytes in.

As in the field report:
- The desktop (compositor, browser, video-call app) always gets what it asks for: Windows'
  memory manager favours the display. When desktop demand + what CUDA processes hold no longer
  fits on the card, the excess is taken from the CUDA processes (spilled to system memory),
  shared in proportion to what each holds (`spill`).
- A spill is sticky: memory that left the card does not come back when the desktop shrinks
  again. Only freeing the allocation (the process exits: a restart) clears it.
- Decode speed (`memory_factor`). Each decode step streams the whole model once; spilled
  bytes come over PCIe:
      step = NOMINAL_STEP_S + spilled_bytes / SPILL_BYTES_PER_S
      spill_factor = NOMINAL_STEP_S / step
  A 2–3 GiB spill turns ~80 tok/s into 7–11 tok/s. Separately, when free memory is nearly
  gone (under PRESSURE_WINDOW_GIB) the driver's paging costs a mild dip:
      pressure_factor = 1 − PRESSURE_DEPTH × (1 − free / window)
  The slower of the two wins; a thermal throttle scales the result by the clock ratio.
- Prefill is bound by compute, not by reading the weights: a step streams the weights once
  for a whole chunk of prompt tokens (~2 s of work at 8,192 tokens), so the same PCIe time
  per step slows it far less (`PREFILL_STEP_S`; paging near a full card slows both alike).
- The onset, for benches that time detection (`mark_onsets`): each server's allocation keeps
  the simulated second its memory first slowed decoding below `SLOWED_FACTOR` (`slowed_at`)
  and below `COLLAPSED_FACTOR` (`collapsed_at`), counted from the previous step of the clock
  (the earliest it can have happened), until it decodes at full speed again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from vramtop.sim.activity import ServerLoad
from vramtop.sim.card import GIB

NOMINAL_STEP_S = 1 / 80
SPILL_BYTES_PER_S = 24 * GIB
PRESSURE_WINDOW_GIB = 0.5
PRESSURE_DEPTH = 0.45
# The memory's factor on decode speed below which a server counts as slowed (the onset of a
# collapse), and as collapsed (under a third of its speed).
SLOWED_FACTOR = 0.9
COLLAPSED_FACTOR = 1 / 3
# One prefill step: a chunk of 8,192 prompt tokens (vLLM's default batch) at ~4,000 tokens/s.
PREFILL_STEP_S = 2.0


@dataclass
class Allocation:
    pid: int
    name: str
    allocated: int
    kind: str = "server"
    spilled: int = 0
    slowed_at: float | None = None
    collapsed_at: float | None = None
    # Whether the server had requests running when it last said (server_condition).
    decoding: bool = False

    @property
    def resident(self) -> int:
        return self.allocated - self.spilled


def spill(holders: Iterable[Allocation], excess: int) -> None:
    """Take `excess` bytes off the card from the allocations still on it, in proportion to
    what each holds there (nothing when `excess` is not positive)."""
    if excess <= 0:
        return
    resident = [a for a in holders if a.resident > 0]
    held = sum(a.resident for a in resident)
    for a in resident:
        a.spilled += min(a.resident, math.ceil(excess * a.resident / held))


def memory_factor(spilled: int, free_bytes: int, step_s: float = NOMINAL_STEP_S) -> float:
    """How much the card's memory slows steps of `step_s` (a decode step by default) of a
    process with `spilled` bytes off the card: spilled bytes over PCIe, or the driver's
    paging when `free_bytes` is nearly gone (1.0: not at all)."""
    spill_factor = step_s / (step_s + spilled / SPILL_BYTES_PER_S)
    window = PRESSURE_WINDOW_GIB * GIB
    squeeze = max(0.0, 1 - free_bytes / window)
    return min(spill_factor, 1 - PRESSURE_DEPTH * squeeze)


def mark_onsets(allocations: Iterable[Allocation], free_bytes: int, since: float) -> None:
    """Each allocation's onsets, from `since` (the clock's previous step) where its memory
    now slows it past one, cleared where it decodes at full speed again."""
    for a in allocations:
        factor = memory_factor(a.spilled, free_bytes)
        if factor >= SLOWED_FACTOR:
            a.slowed_at = a.collapsed_at = None
            continue
        if a.slowed_at is None:
            a.slowed_at = since
        if factor < COLLAPSED_FACTOR and a.collapsed_at is None:
            a.collapsed_at = since


def server_loads(allocations: Iterable[Allocation], free_bytes: int) -> list[ServerLoad]:
    """What each allocation's decode steps take now, against an uncontended card's."""
    return [
        ServerLoad(
            decoding=a.decoding,
            spilled_bytes=a.spilled,
            step_s=NOMINAL_STEP_S / max(memory_factor(a.spilled, free_bytes), 1e-6),
            nominal_step_s=NOMINAL_STEP_S,
        )
        for a in allocations
    ]
