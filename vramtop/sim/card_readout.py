"""What the simulated card's hardware says beside its memory: its temperature and clock,
what NVML would say it does, and AMD's GTT. Pure: the ledger's figures in."""

from __future__ import annotations

from collections.abc import Iterable

from vramtop.sim.activity import ServerLoad, card_activity
from vramtop.sim.card import MIB, CardModel
from vramtop.sim.contention import Allocation
from vramtop.sim.scenario import Scenario
from vramtop.sim.world_state import ActivityFields, GttFields, ProcessState

# What the amdgpu driver itself keeps in GTT on an idle card (ring buffers, firmware).
GTT_BASELINE_BYTES = 180 * MIB


def thermal(scenario: Scenario, t: float, call_level: float) -> tuple[int, int, tuple[str, ...]]:
    """(temperature °C, SM clock MHz, throttle reasons) at `t`: a hot spell's, else warmer
    during a call."""
    spell = scenario.hot_spell(t)
    if spell is not None:
        return spell.temperature_c, spell.sm_clock_mhz, spell.throttle
    temp = scenario.call_temperature_c if call_level > 0.5 else None
    return temp or scenario.idle_temperature_c, scenario.sm_clock_mhz, ()


def activity_fields(
    card: CardModel, loads: list[ServerLoad], call_level: float, residency_failures: float
) -> ActivityFields:
    """What NVML would say the card does (see activity.py): PCIe and utilisation on the
    NVIDIA card with its own VRAM; utilisation alone on unified memory (NVML's PCIe
    counters are not how a GB10 reads its memory); neither on AMD (its probe reads
    neither). On WSL2's card, the residency failures so far."""
    if card.spill == "gtt":
        return {}
    activity = card_activity(loads, call_level)
    fields: ActivityFields = {
        "gpu_util": activity.gpu_util,
        "memory_util": activity.memory_util,
    }
    if card.spill == "system":
        fields["pcie_rx_bytes_per_s"] = activity.pcie_rx_bytes_per_s
        fields["pcie_tx_bytes_per_s"] = activity.pcie_tx_bytes_per_s
        fields["residency_failures_total"] = int(residency_failures)
    return fields


def gtt_fields(card: CardModel, allocations: Iterable[Allocation]) -> GttFields:
    """AMD: the card's GTT (a little for the driver's own use, plus every eviction)."""
    if card.spill != "gtt":
        return {}
    evicted = sum(a.spilled for a in allocations)
    return {
        "gtt_total_bytes": card.gtt_total_mib * MIB,
        "gtt_used_bytes": GTT_BASELINE_BYTES + evicted,
    }


def process_row(a: Allocation, gtt: bool) -> ProcessState:
    row: ProcessState = {"pid": a.pid, "name": a.name, "used_bytes": a.resident, "kind": a.kind}
    if gtt:
        # AMD: what was evicted from VRAM sits in GTT, and fdinfo says so per process.
        row["gtt_bytes"] = a.spilled
    return row
