"""The simulated world's `state` answer, as its readers take it: the shape the ledger writes
(`Ledger.state()`, sent as JSON over the world's socket) and the probes read back. A key
marked `NotRequired` is one a card leaves out (GTT on AMD only, PCIe and utilisation on
NVIDIA), or one a reader does without.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class GttFields(TypedDict, total=False):
    """AMD's card only: its GTT."""

    gtt_total_bytes: int
    gtt_used_bytes: int


class ActivityFields(TypedDict, total=False):
    """What NVML says the card does: utilisation, and PCIe and residency failures where the
    card spills to system memory."""

    gpu_util: float
    memory_util: float
    pcie_rx_bytes_per_s: int
    pcie_tx_bytes_per_s: int
    residency_failures_total: int


class DeviceState(TypedDict):
    index: int
    name: str
    total_bytes: int
    used_bytes: int
    free_bytes: int
    temperature_c: int
    sm_clock_mhz: int
    throttle: list[str]
    memory_kind: NotRequired[str]
    gtt_total_bytes: NotRequired[int]
    gtt_used_bytes: NotRequired[int]
    gpu_util: NotRequired[float]
    memory_util: NotRequired[float]
    pcie_rx_bytes_per_s: NotRequired[int]
    pcie_tx_bytes_per_s: NotRequired[int]
    residency_failures_total: NotRequired[int]


class ProcessState(TypedDict):
    pid: int
    name: str
    used_bytes: int
    kind: str
    gpu: NotRequired[bool]  # desktop apps only: False where it uses system memory alone
    # Desktop apps only: the name the process has on a Linux desktop (the machine read
    # natively, without --wsl), where the scenario names a Windows program.
    linux_name: NotRequired[str]
    gtt_bytes: NotRequired[int]  # AMD: what was evicted to GTT


class DesktopState(TypedDict):
    pid: int
    name: str
    demand_bytes: int


class ServerState(TypedDict):
    pid: int
    name: str
    allocated_bytes: int
    resident_bytes: int
    spilled_bytes: int
    spill_fraction: float
    rate_factor: float
    slowed_at: float | None
    collapsed_at: float | None


class WorldState(TypedDict):
    ok: bool
    t: float
    scenario: str
    device: DeviceState
    processes: list[ProcessState]
    desktop: list[DesktopState]
    desktop_bytes: int
    call_on: bool
    call_level: float
    servers: list[ServerState]
    speed: NotRequired[float]  # added by the world to its answer, not by the ledger
    error: NotRequired[str]  # on an answer that is not ok


class Condition(TypedDict):
    """The `server_condition` answer: how fast the server holding `pid` can decode now."""

    ok: bool
    pid: int
    known: bool
    spilled_bytes: int
    spill_fraction: float
    rate_factor: float
    prefill_factor: float
