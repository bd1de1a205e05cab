"""The Windows side's values: one reading of who holds the card (or why there is none).

Under WSL2 NVML shows the card's totals but no process; Windows' `GPU Process Memory`
counters charge every allocation to a Windows process, split into *dedicated* (in VRAM) and
*shared* (system memory the GPU reads over PCIe). How a reading is made from those counters
is in `powershell` and `attribution`; how it is recorded, in `session_fields`.
"""

from __future__ import annotations

from dataclasses import dataclass

UNAVAILABLE_PREFIX = "Windows side not available"
# Windows 11 first, then Windows 10's name (why: see `powershell`'s docstring).
WSL_VM_NAMES = ("vmmemWSL", "vmmem")


@dataclass(frozen=True)
class WindowsProcessGpu:
    """One Windows process's GPU memory (summed over the chosen adapter's instances)."""

    pid: int
    name: str
    dedicated_bytes: int
    shared_bytes: int


@dataclass(frozen=True)
class WindowsAdapterGpu:
    """One adapter's memory as `GPU Adapter Memory` reports it (all processes together)."""

    luid: str  # "0x00000000_0x0000C3F1"
    dedicated_bytes: int
    shared_bytes: int
    total_committed: int


@dataclass(frozen=True)
class WindowsGpuReading:
    """What the Windows side showed at `t`, or why it showed nothing."""

    processes: tuple[WindowsProcessGpu, ...] = ()  # every process on the chosen adapter
    adapters: tuple[WindowsAdapterGpu, ...] = ()
    wsl_vm: WindowsProcessGpu | None = None  # the process WSL2's GPU memory is charged to
    desktop: tuple[WindowsProcessGpu, ...] = ()  # everything else, most dedicated first
    error: str | None = None  # the reason, in the user's words
    t: float = 0.0
    adapter_luid: str | None = None  # the adapter the processes were read from (the big card)
    source: str = "powershell"  # "powershell" or "sim"

    @property
    def available(self) -> bool:
        return self.error is None

    @property
    def panel_text(self) -> str | None:
        """The one line the console shows instead of the numbers, or None when available."""
        return None if self.error is None else f"{UNAVAILABLE_PREFIX}: {self.error}"

    @property
    def desktop_bytes(self) -> int:
        return sum(p.dedicated_bytes for p in self.desktop)


def unavailable(reason: str, t: float = 0.0, source: str = "powershell") -> WindowsGpuReading:
    return WindowsGpuReading(error=reason, t=t, source=source)


# --- JSON as PowerShell and recordings write it ---------------------------------------------
def json_list(value: object) -> list[object]:
    # ConvertTo-Json turns a one-element array into the bare object, and $null into null.
    if value is None:
        return []
    if isinstance(value, list):
        return value
    return [value]


def counter_bytes(value: object) -> int:
    # Formatted perf counters are uint64; CIM may hand them over as numbers or as strings,
    # and a driver glitch can make one negative: clamp rather than wrap.
    if isinstance(value, bool) or value is None:
        return 0
    try:
        if isinstance(value, str):
            number = int(float(value))
        elif isinstance(value, int | float):
            number = int(value)
        else:  # a list or an object: not a count
            return 0
    except (TypeError, ValueError, OverflowError):
        return 0
    return max(0, number)
