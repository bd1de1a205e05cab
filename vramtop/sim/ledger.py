"""The simulated card's memory ledger: what each process holds on the card and what spilled
off it, in simulated time (no I/O: time is passed in). The desktop's demand is a
`DesktopLoad`'s, what a spill costs is the contention model's (contention.py), and what the
hardware says beside the memory is the card's readout (card_readout.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vramtop.core.json_types import JsonObject
from vramtop.sim.activity import residency_failures
from vramtop.sim.card import CARDS, DEFAULT_CARD, GIB, MIB, TOTAL_MIB, CardModel
from vramtop.sim.card_readout import activity_fields, gtt_fields, process_row, thermal
from vramtop.sim.contention import (
    PREFILL_STEP_S,
    Allocation,
    mark_onsets,
    memory_factor,
    server_loads,
    spill,
)
from vramtop.sim.desktop_load import DesktopLoad
from vramtop.sim.scenario import Scenario
from vramtop.sim.world_state import (
    Condition,
    DesktopState,
    ProcessState,
    ServerState,
    WorldState,
)


@dataclass
class Ledger:
    scenario: Scenario
    total: int = TOTAL_MIB * MIB
    seed: int = 0
    allocations: dict[int, Allocation] = field(default_factory=dict)
    t: float = 0.0
    # Which machine: its name, memory model and where squeezed memory goes (see card.py).
    card: CardModel = field(default_factory=lambda: CARDS[DEFAULT_CARD])
    # WSL2's make-resident failures so far (fractional; the state reports whole lines).
    residency_failures_total: float = 0.0
    # What the desktop asks of the card, and the call (made from `scenario` and `seed`).
    desktop: DesktopLoad = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.desktop = DesktopLoad(self.scenario, self.seed)

    # -- time ---------------------------------------------------------------------------------
    def advance(self, t: float) -> None:
        """Move simulated time forward to `t`: calls ramp, and spills happen."""
        dt = max(0.0, t - self.t)
        before, self.t = self.t, max(self.t, t)
        self.desktop.ramp(self.t, dt)
        spill(self.allocations.values(), self.desktop_bytes() + self.resident_bytes() - self.total)
        mark_onsets(self.allocations.values(), self.free_bytes(), before)
        if self.card.spill == "system":  # WSL2's driver logs them (dxgkrnl)
            loads = server_loads(self.allocations.values(), self.free_bytes())
            self.residency_failures_total += residency_failures(loads, self.free_bytes(), dt)

    @property
    def call_on(self) -> bool:
        return self.desktop.call_on(self.t)

    @property
    def call_level(self) -> float:
        """Where a call's demand stands, 0 (none) .. 1 (full)."""
        return self.desktop.call_level

    def set_call(self, on: bool) -> None:
        """A call by request; it overrides the scenario's schedule from now on."""
        self.desktop.set_call(on)

    # -- desktop ------------------------------------------------------------------------------
    def desktop_bytes(self) -> int:
        return min(self.total, sum(b for _, _, b in self.desktop.demand(self.t)))

    # -- the card -----------------------------------------------------------------------------
    def resident_bytes(self) -> int:
        return sum(a.resident for a in self.allocations.values())

    def free_bytes(self) -> int:
        return max(0, self.total - self.desktop_bytes() - self.resident_bytes())

    def used_bytes(self) -> int:
        return self.total - self.free_bytes()

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
        return thermal(self.scenario, self.t, self.call_level)

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
        free = self.free_bytes()
        return {
            "ok": True,
            "pid": pid,
            "known": a is not None,
            "spilled_bytes": spilled,
            "spill_fraction": fraction,
            "rate_factor": memory_factor(spilled, free) * clock_factor * self.card.decode_scale,
            "prefill_factor": memory_factor(spilled, free, PREFILL_STEP_S)
            * clock_factor
            * self.card.decode_scale,
        }

    def state(self) -> WorldState:
        temp, clock, throttle = self.thermal()
        desktop = self.desktop.demand(self.t)
        apps = self.scenario.desktop
        processes: list[ProcessState] = [
            {"pid": pid, "name": name, "used_bytes": b, "kind": "desktop", "gpu": app.gpu}
            for (pid, name, b), app in zip(desktop, apps, strict=True)
        ]
        for process, app in zip(processes, apps, strict=True):
            if app.linux_name is not None:
                process["linux_name"] = app.linux_name
        gtt = self.card.spill == "gtt"
        loads = server_loads(self.allocations.values(), self.free_bytes())
        processes += [process_row(a, gtt) for a in self.allocations.values()]
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
                **gtt_fields(self.card, self.allocations.values()),
                **activity_fields(self.card, loads, self.call_level, self.residency_failures_total),
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
