"""The simulated card's memory ledger and its contention model. No I/O: time is passed in.

Contention, as in the field report:
- The desktop (compositor, browser, video-call app) always gets what it asks for: Windows'
  memory manager favours the display. When desktop demand + what CUDA processes hold no longer
  fits on the card, the excess is taken from the CUDA processes (spilled to system memory),
  shared in proportion to what each holds.
- A spill is sticky: memory that left the card does not come back when the desktop shrinks
  again. Only freeing the allocation (the process exits: a restart) clears it.
- Decode speed. Each decode step streams the whole model once; spilled bytes come over PCIe:
      step = NOMINAL_STEP_S + spilled_bytes / SPILL_BYTES_PER_S
      spill_factor = NOMINAL_STEP_S / step
  A 2–3 GiB spill turns ~80 tok/s into 7–11 tok/s. Separately, when free memory is nearly
  gone (under PRESSURE_WINDOW_GIB) the driver's paging costs a mild dip:
      pressure_factor = 1 − PRESSURE_DEPTH × (1 − free / window)
  The slower of the two wins; a thermal throttle scales the result by the clock ratio.
- Prefill is bound by compute, not by reading the weights: a step streams the weights once
  for a whole chunk of prompt tokens (~2 s of work at 8,192 tokens), so the same PCIe time
  per step slows it far less (`prefill_factor`; paging near a full card slows both alike).
- The onset, for benches that time detection: each server's allocation keeps the simulated
  second its memory first slowed decoding below `SLOWED_FACTOR` (`slowed_at`) and below
  `COLLAPSED_FACTOR` (`collapsed_at`), counted from the previous step of the clock (the
  earliest it can have happened), until it decodes at full speed again.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from vramtop.core.json_types import JsonObject
from vramtop.sim.activity import ServerLoad, card_activity, residency_failures
from vramtop.sim.card import CARDS, DEFAULT_CARD, GIB, MIB, TOTAL_MIB, CardModel
from vramtop.sim.scenario import Scenario
from vramtop.sim.world_state import (
    ActivityFields,
    Condition,
    DesktopState,
    GttFields,
    ProcessState,
    ServerState,
    WorldState,
)

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
# Desktop processes get pids above any real pid (pid_max is at most 2**22), so code that walks
# the server's process tree never confuses them with real processes.
DESKTOP_PID_BASE = 4_194_400
# What the amdgpu driver itself keeps in GTT on an idle card (ring buffers, firmware).
GTT_BASELINE_BYTES = 180 * MIB


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


@dataclass
class Ledger:
    scenario: Scenario
    total: int = TOTAL_MIB * MIB
    seed: int = 0
    allocations: dict[int, Allocation] = field(default_factory=dict)
    # Where a call's demand stands, 0 (none) .. 1 (full), and whether a call was asked for.
    call_level: float = 0.0
    manual_call: bool | None = None
    t: float = 0.0
    # Which machine: its name, memory model and where squeezed memory goes (see card.py).
    card: CardModel = field(default_factory=lambda: CARDS[DEFAULT_CARD])
    # WSL2's make-resident failures so far (fractional; the state reports whole lines).
    residency_failures_total: float = 0.0

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        self._phases = [(rng.uniform(0, 2 * math.pi), rng.uniform(20, 60)) for _ in range(16)]

    # -- time ---------------------------------------------------------------------------------
    def advance(self, t: float) -> None:
        """Move simulated time forward to `t`: calls ramp, and spills happen."""
        dt = max(0.0, t - self.t)
        before, self.t = self.t, max(self.t, t)
        target = 1.0 if self.call_on else 0.0
        if self.call_level < target:
            self.call_level = min(target, self.call_level + dt / self.scenario.call_ramp_up_s)
        elif self.call_level > target:
            self.call_level = max(target, self.call_level - dt / self.scenario.call_ramp_down_s)
        self._spill()
        self._mark_onsets(before)
        if self.card.spill == "system":  # WSL2's driver logs them (dxgkrnl)
            loads = self._loads()
            self.residency_failures_total += residency_failures(loads, self.free_bytes(), dt)

    @property
    def call_on(self) -> bool:
        if self.manual_call is not None:
            return self.manual_call
        return self.scenario.call_scheduled(self.t)

    def set_call(self, on: bool) -> None:
        """A call by request; it overrides the scenario's schedule from now on."""
        self.manual_call = on

    # -- desktop ------------------------------------------------------------------------------
    def desktop_demand(self) -> list[tuple[int, str, int]]:
        """(pid, name, bytes) for each desktop process at the current time."""
        out = []
        for i, app in enumerate(self.scenario.desktop):
            phase, period = self._phases[i % len(self._phases)]
            wobble = self.scenario.jitter_gib * math.sin(2 * math.pi * self.t / period + phase)
            gib = max(0.0, app.idle_gib + app.call_gib * self.call_level + wobble)
            out.append((DESKTOP_PID_BASE + i, app.name, int(gib * GIB)))
        return out

    def desktop_bytes(self) -> int:
        return min(self.total, sum(b for _, _, b in self.desktop_demand()))

    # -- the card -----------------------------------------------------------------------------
    def resident_bytes(self) -> int:
        return sum(a.resident for a in self.allocations.values())

    def free_bytes(self) -> int:
        return max(0, self.total - self.desktop_bytes() - self.resident_bytes())

    def used_bytes(self) -> int:
        return self.total - self.free_bytes()

    def _spill(self) -> None:
        excess = self.desktop_bytes() + self.resident_bytes() - self.total
        if excess <= 0:
            return
        holders = [a for a in self.allocations.values() if a.resident > 0]
        held = sum(a.resident for a in holders)
        for a in holders:
            a.spilled += min(a.resident, math.ceil(excess * a.resident / held))

    def _mark_onsets(self, since: float) -> None:
        for a in self.allocations.values():
            factor = self._memory_factor(a)
            if factor >= SLOWED_FACTOR:
                a.slowed_at = a.collapsed_at = None
                continue
            if a.slowed_at is None:
                a.slowed_at = since
            if factor < COLLAPSED_FACTOR and a.collapsed_at is None:
                a.collapsed_at = since

    def _memory_factor(self, a: Allocation | None, step_s: float = NOMINAL_STEP_S) -> float:
        """How much the card's memory slows `a`'s steps of `step_s` (a decode step by
        default): spilled bytes over PCIe, or the driver's paging when free memory is nearly
        gone (1.0: not at all)."""
        spilled = a.spilled if a else 0
        spill_factor = step_s / (step_s + spilled / SPILL_BYTES_PER_S)
        window = PRESSURE_WINDOW_GIB * GIB
        squeeze = max(0.0, 1 - self.free_bytes() / window)
        return min(spill_factor, 1 - PRESSURE_DEPTH * squeeze)

    def alloc(self, pid: int, name: str, nbytes: int, kind: str = "server") -> JsonObject:
        free = self.free_bytes()
        if nbytes > free:
            return {
                "ok": False,
                "error": (
                    f"CUDA out of memory: tried to allocate {nbytes / GIB:.2f} GiB, "
                    f"{free / GIB:.2f} GiB free of {self.total / GIB:.2f} GiB"
                ),
                "requested_bytes": nbytes,
                "free_bytes": free,
                "total_bytes": self.total,
            }
        a = self.allocations.setdefault(pid, Allocation(pid, name, 0, kind))
        a.allocated += nbytes
        a.name = name
        return {"ok": True, "pid": pid, "allocated_bytes": a.allocated, "free_bytes": free - nbytes}

    def free(self, pid: int) -> int:
        """Release everything `pid` holds (spill included); the bytes released."""
        a = self.allocations.pop(pid, None)
        return a.allocated if a else 0

    # -- what the hardware shows ---------------------------------------------------------------
    def thermal(self) -> tuple[int, int, tuple[str, ...]]:
        spell = self.scenario.hot_spell(self.t)
        if spell is not None:
            return spell.temperature_c, spell.sm_clock_mhz, spell.throttle
        temp = self.scenario.call_temperature_c if self.call_level > 0.5 else None
        return temp or self.scenario.idle_temperature_c, self.scenario.sm_clock_mhz, ()

    def condition(self, pid: int, decoding: bool | None = None) -> Condition:
        """How fast the server holding `pid` can decode now, relative to an uncontended card.
        `decoding`: whether it has requests running now, where the server says so."""
        a = self.allocations.get(pid)
        if a is not None and decoding is not None:
            a.decoding = decoding
        spilled = a.spilled if a else 0
        fraction = spilled / a.allocated if a and a.allocated else 0.0
        _, clock, _ = self.thermal()
        clock_factor = min(1.0, clock / self.scenario.sm_clock_mhz)
        return {
            "ok": True,
            "pid": pid,
            "known": a is not None,
            "spilled_bytes": spilled,
            "spill_fraction": fraction,
            "rate_factor": self._memory_factor(a) * clock_factor * self.card.decode_scale,
            "prefill_factor": self._memory_factor(a, PREFILL_STEP_S)
            * clock_factor
            * self.card.decode_scale,
        }

    def state(self) -> WorldState:
        temp, clock, throttle = self.thermal()
        desktop = self.desktop_demand()
        apps = self.scenario.desktop
        processes: list[ProcessState] = [
            {"pid": pid, "name": name, "used_bytes": b, "kind": "desktop", "gpu": app.gpu}
            for (pid, name, b), app in zip(desktop, apps, strict=True)
        ]
        for process, app in zip(processes, apps, strict=True):
            if app.linux_name is not None:
                process["linux_name"] = app.linux_name
        gtt = self.card.spill == "gtt"
        processes += [_process(a, gtt) for a in self.allocations.values()]
        servers: list[ServerState] = []
        for a in self.allocations.values():
            cond = self.condition(a.pid)
            servers.append(
                {
                    "pid": a.pid,
                    "name": a.name,
                    "allocated_bytes": a.allocated,
                    "resident_bytes": a.resident,
                    "spilled_bytes": a.spilled,
                    "spill_fraction": cond["spill_fraction"],
                    "rate_factor": cond["rate_factor"],
                    "slowed_at": a.slowed_at,
                    "collapsed_at": a.collapsed_at,
                }
            )
        return {
            "ok": True,
            "t": self.t,
            "scenario": self.scenario.name,
            "device": {
                "index": 0,
                "name": self.card.device_name,
                "memory_kind": self.card.memory_kind,
                **self._gtt_fields(),
                **self._activity_fields(),
                "total_bytes": self.total,
                "used_bytes": self.used_bytes(),
                "free_bytes": self.free_bytes(),
                "temperature_c": temp,
                "sm_clock_mhz": clock,
                "throttle": list(throttle),
            },
            "processes": processes,
            "desktop": [DesktopState(pid=p, name=n, demand_bytes=b) for p, n, b in desktop],
            "desktop_bytes": self.desktop_bytes(),
            "call_on": self.call_on,
            "call_level": self.call_level,
            "servers": servers,
        }

    def _loads(self) -> list[ServerLoad]:
        return [
            ServerLoad(
                decoding=a.decoding,
                spilled_bytes=a.spilled,
                step_s=NOMINAL_STEP_S / max(self._memory_factor(a), 1e-6),
                nominal_step_s=NOMINAL_STEP_S,
            )
            for a in self.allocations.values()
        ]

    def _activity_fields(self) -> ActivityFields:
        """What NVML would say the card does (see activity.py): PCIe and utilisation on the
        NVIDIA card with its own VRAM; utilisation alone on unified memory (NVML's PCIe
        counters are not how a GB10 reads its memory); neither on AMD (its probe reads
        neither). On WSL2's card, the residency failures so far."""
        if self.card.spill == "gtt":
            return {}
        activity = card_activity(self._loads(), self.call_level)
        fields: ActivityFields = {
            "gpu_util": activity.gpu_util,
            "memory_util": activity.memory_util,
        }
        if self.card.spill == "system":
            fields["pcie_rx_bytes_per_s"] = activity.pcie_rx_bytes_per_s
            fields["pcie_tx_bytes_per_s"] = activity.pcie_tx_bytes_per_s
            fields["residency_failures_total"] = int(self.residency_failures_total)
        return fields

    def _gtt_fields(self) -> GttFields:
        """AMD: the card's GTT (a little for the driver's own use, plus every eviction)."""
        if self.card.spill != "gtt":
            return {}
        evicted = sum(a.spilled for a in self.allocations.values())
        return {
            "gtt_total_bytes": self.card.gtt_total_mib * MIB,
            "gtt_used_bytes": GTT_BASELINE_BYTES + evicted,
        }


def _process(a: Allocation, gtt: bool) -> ProcessState:
    row: ProcessState = {"pid": a.pid, "name": a.name, "used_bytes": a.resident, "kind": a.kind}
    if gtt:
        # AMD: what was evicted from VRAM sits in GTT, and fdinfo says so per process.
        row["gtt_bytes"] = a.spilled
    return row
