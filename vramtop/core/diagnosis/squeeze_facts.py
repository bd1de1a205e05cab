"""The evidence of the kinds the desktop's squeeze names (vram_contention, vram_slowdown), as
typed facts: each field is a key of the finding's `evidence`, in the order the session format
writes them; a spill, where one was seen, adds its own figures (`with_spill`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vramtop.core.findings import COUNT, Facts
from vramtop.core.json_types import JsonObject
from vramtop.core.windows.prose import with_spill
from vramtop.core.windows.spill import SpillEvidence


@dataclass(frozen=True)
class CollapseFacts(Facts):
    """A collapse's evidence (the session format's keys, in order)."""

    generation_tps: float
    baseline_generation_tps: float  # the JSON key's word; the normal total rate
    ratio: float | None
    # Additions: the per-request decode speed that was judged, and where its normal came
    # from (`learned` on this run or `remembered` from an earlier one).
    decode_tps: float
    normal_decode_tps: float
    decode_measure: str
    normal_rate_source: str | None
    normal_rate_saved_at: float | None
    requests_running: float = field(metadata=COUNT)
    kv_cache_usage: float | None
    used_bytes: int
    total_bytes: int
    used_fraction: float
    desktop_bytes: int | None
    desktop_bytes_at_start: int | None
    desktop_growth_bytes: int | None
    desktop_peak_bytes: int | None
    server_bytes: int | None
    # "unified": the numbers are the system's memory (DGX Spark), and contention is system
    # memory pressure: the server's budget against what the kernel can still hand out.
    memory_kind: str
    memory_available_bytes: int | None
    budget_bytes: int | None
    spill: SpillEvidence | None = field(default=None, metadata={"json": False})

    def to_json(self) -> JsonObject:
        return with_spill(super().to_json(), self.spill)


@dataclass(frozen=True)
class MemoryOnlyFacts(Facts):
    """The evidence of a collapse that memory alone names (the session format's keys)."""

    desktop_bytes: int
    desktop_allowance_bytes: int
    wsl_vm_shared_bytes: int
    wsl_vm_dedicated_bytes: int
    kv_cache_usage: float | None
    used_bytes: int
    total_bytes: int
    generation_tps: float | None
    baseline_generation_tps: None = None  # no normal rate: that is why memory alone names it
    spill: SpillEvidence | None = field(default=None, metadata={"json": False})

    def to_json(self) -> JsonObject:
        return with_spill(super().to_json(), self.spill)


@dataclass(frozen=True)
class SplitOnlyFacts(Facts):
    """The evidence of a collapse that a per-process split alone names (no Windows side)."""

    desktop_bytes: int
    desktop_allowance_bytes: int
    desktop_over_allowance_bytes: int
    server_bytes: int | None
    budget_bytes: int
    kv_cache_usage: float | None
    used_bytes: int
    total_bytes: int
    generation_tps: float | None
    baseline_generation_tps: None = None  # no normal rate: that is why memory alone names it
    spill: SpillEvidence | None = field(default=None, metadata={"json": False})

    def to_json(self) -> JsonObject:
        return with_spill(super().to_json(), self.spill)


@dataclass(frozen=True)
class SlowdownFacts(Facts):
    """A slowdown's evidence (the session format's keys, in order)."""

    generation_tps: float
    decode_tps: float
    normal_decode_tps: float
    ratio: float | None
    decode_measure: str
    normal_rate_source: str | None
    normal_rate_saved_at: float | None
    slow_seconds: int
    judged_seconds: int
    requests_running: float = field(metadata=COUNT)
    kv_cache_usage: float | None
    used_bytes: int
    total_bytes: int
    used_fraction: float
    memory_kind: str
    desktop_bytes: int | None
    desktop_bytes_at_start: int | None
    desktop_growth_bytes: int | None
    desktop_peak_bytes: int | None
    desktop_over_allowance_bytes: int | None
    server_bytes: int | None
    budget_bytes: int | None
    spill: SpillEvidence | None = field(default=None, metadata={"json": False})

    def to_json(self) -> JsonObject:
        return with_spill(super().to_json(), self.spill)
