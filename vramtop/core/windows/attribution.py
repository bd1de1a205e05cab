"""Which process is whose: Windows' per-process GPU counters summed on the big card, and the
WSL VM told apart from the desktop's programs (the naming is cited in `powershell`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from vramtop.core.windows.reading import (
    WSL_VM_NAMES,
    WindowsAdapterGpu,
    WindowsGpuReading,
    WindowsProcessGpu,
    counter_bytes,
)

# Windows processes without an image file: Get-Process and Task Manager both show no `.exe`.
_NO_EXE = frozenset(
    n.lower()
    for n in (
        "vmmem",
        "vmmemWSL",
        "System",
        "Registry",
        "Idle",
        "Memory Compression",
        "Secure System",
    )
)
_PROCESS_NAME = re.compile(r"^pid_(\d+)_luid_(0x[0-9A-Fa-f]+_0x[0-9A-Fa-f]+)_phys_(\d+)")
_ADAPTER_NAME = re.compile(r"^luid_(0x[0-9A-Fa-f]+_0x[0-9A-Fa-f]+)_phys_(\d+)")


def windows_name(name: str) -> str:
    """`dwm` → `dwm.exe` as Task Manager shows it; `vmmemWSL` and `System` stay bare."""
    name = name.strip()
    if not name or name.lower().endswith(".exe") or name.lower() in _NO_EXE:
        return name
    return f"{name}.exe"


def parse_process_instance(name: str) -> tuple[int, str] | None:
    """`pid_1234_luid_0x00000000_0x0000C3F1_phys_0` → (1234, "0x00000000_0x0000C3F1")."""
    m = _PROCESS_NAME.match(name)
    return (int(m.group(1)), m.group(2).lower()) if m else None


def parse_adapter_instance(name: str) -> str | None:
    m = _ADAPTER_NAME.match(name)
    return m.group(1).lower() if m else None


def _dedicated(row: Mapping[str, object]) -> int:
    # LocalUsage is what sits in the adapter's own memory; older builds lack it.
    local = row.get("LocalUsage")
    return counter_bytes(row.get("DedicatedUsage") if local is None else local)


def _shared(row: Mapping[str, object]) -> int:
    non_local = row.get("NonLocalUsage")
    return (
        counter_bytes(non_local) if non_local is not None else counter_bytes(row.get("SharedUsage"))
    )


def merge_adapters(rows: Iterable[Mapping[str, object]]) -> tuple[WindowsAdapterGpu, ...]:
    """Adapter instances summed per luid (a card may report several `phys`/`part` rows)."""
    totals: dict[str, list[int]] = {}
    for row in rows:
        luid = parse_adapter_instance(str(row.get("Name", "")))
        if luid is None:
            continue
        acc = totals.setdefault(luid, [0, 0, 0])
        acc[0] += counter_bytes(row.get("DedicatedUsage"))
        acc[1] += counter_bytes(row.get("SharedUsage"))
        acc[2] += counter_bytes(row.get("TotalCommitted"))
    return tuple(WindowsAdapterGpu(luid, d, s, c) for luid, (d, s, c) in totals.items())


def choose_adapter(
    adapters: Sequence[WindowsAdapterGpu], process_rows: Iterable[Mapping[str, object]] = ()
) -> str | None:
    """The luid carrying the most dedicated memory: the discrete card vLLM runs on.

    Without adapter rows the process rows decide. An integrated GPU's "dedicated" memory is a
    small BIOS carve-out, so the busy NVIDIA card wins this comparison.
    """
    if adapters:
        return max(adapters, key=lambda a: a.dedicated_bytes).luid
    per_luid: dict[str, int] = {}
    for row in process_rows:
        parsed = parse_process_instance(str(row.get("Name", "")))
        if parsed:
            per_luid[parsed[1]] = per_luid.get(parsed[1], 0) + _dedicated(row)
    return max(per_luid, key=lambda k: per_luid[k]) if per_luid else None


def find_wsl_vm(processes: Sequence[WindowsProcessGpu]) -> WindowsProcessGpu | None:
    """The WSL VM's entry: every `vmmemWSL` summed, else every `vmmem` (Windows 10)."""
    for vm_name in WSL_VM_NAMES:
        hits = [p for p in processes if p.name.lower() == vm_name.lower()]
        if hits:
            return WindowsProcessGpu(
                pid=hits[0].pid,
                name=vm_name,
                dedicated_bytes=sum(p.dedicated_bytes for p in hits),
                shared_bytes=sum(p.shared_bytes for p in hits),
            )
    return None


def attribute(
    process_rows: Iterable[Mapping[str, object]],
    adapter_rows: Iterable[Mapping[str, object]],
    names: Mapping[int, str],
    t: float,
    source: str = "powershell",
) -> WindowsGpuReading:
    """Sum each pid on the chosen card, then split the WSL VM from the desktop programs."""
    rows = list(process_rows)
    adapters = merge_adapters(adapter_rows)
    luid = choose_adapter(adapters, rows)
    per_pid: dict[int, list[int]] = {}
    for row in rows:
        parsed = parse_process_instance(str(row.get("Name", "")))
        if parsed is None or (luid is not None and parsed[1] != luid):
            continue
        acc = per_pid.setdefault(parsed[0], [0, 0])
        acc[0] += _dedicated(row)
        acc[1] += _shared(row)
    processes = tuple(
        WindowsProcessGpu(pid, windows_name(names.get(pid, "")) or f"pid {pid}", d, s)
        for pid, (d, s) in per_pid.items()
    )
    wsl_vm = find_wsl_vm(processes)
    vm_names = {wsl_vm.name.lower()} if wsl_vm else set()
    desktop = tuple(
        sorted(
            (p for p in processes if p.name.lower() not in vm_names and p.dedicated_bytes > 0),
            key=lambda p: (-p.dedicated_bytes, p.name),
        )
    )
    return WindowsGpuReading(
        processes=processes,
        adapters=adapters,
        wsl_vm=wsl_vm,
        desktop=desktop,
        t=t,
        adapter_luid=luid,
        source=source,
    )
