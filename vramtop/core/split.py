"""Who holds the card: the vLLM server's share versus the desktop / everything else.

Where the driver lists per-process memory (native Linux), the server's share is the sum over
its process tree. Where it does not (WSL2), the share is derived: vLLM fills its budget
(ceil(total × util)) with weights, activations and KV cache, and holds a little more outside
that budget (the CUDA context). Whatever else is in use is counted as the desktop's.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from vramtop.core.budget import (
    OUTSIDE_BUDGET_ESTIMATE_BYTES,
    budget_bytes,
    desktop_headroom_bytes,
)
from vramtop.core.model import GIB, GpuDevice, MemoryKind, Split, SplitMethod
from vramtop.core.windows.reading import WindowsGpuReading

__all__ = ["OUTSIDE_BUDGET_ESTIMATE_BYTES", "budget_bytes", "split_card", "split_from_windows"]


def split_card(
    device: GpuDevice,
    *,
    server_pids: Collection[int] = (),
    server_running: bool,
    util: float | None,
    outside_budget_bytes: int = OUTSIDE_BUDGET_ESTIMATE_BYTES,
) -> Split:
    """Divide `device` into server, desktop and free, saying how the numbers were obtained.

    On unified memory (one pool shared with the CPU) the same arithmetic holds: the pool is
    the system's memory, and the desktop's share is everything else the system uses."""
    split = _split_card(
        device,
        server_pids=server_pids,
        server_running=server_running,
        util=util,
        outside_budget_bytes=outside_budget_bytes,
    )
    return _with_memory_kind(split, device, server_pids)


def _with_memory_kind(split: Split, device: GpuDevice, server_pids: Collection[int]) -> Split:
    """The split told what its total is (card or shared pool) and, on AMD, how much of the
    server's memory lies in GTT."""
    gtt = None
    if device.processes is not None and server_pids:
        pids = set(server_pids)
        held = [p.gtt_bytes for p in device.processes if p.pid in pids and p.gtt_bytes is not None]
        gtt = sum(held) if held else None
    detail = split.detail
    if device.memory_kind is MemoryKind.UNIFIED:
        detail = (
            f"Unified memory (shared with the system). {detail} The total is the system's "
            "memory; the page cache counts as free (MemAvailable)."
        )
    return replace(split, memory_kind=device.memory_kind, server_gtt_bytes=gtt, detail=detail)


def _split_card(
    device: GpuDevice,
    *,
    server_pids: Collection[int],
    server_running: bool,
    util: float | None,
    outside_budget_bytes: int,
) -> Split:
    total, used = device.total_bytes, device.used_bytes
    free = max(0, total - used)
    budget = budget_bytes(total, util) if util is not None else None
    headroom = _headroom(total, util, outside_budget_bytes)

    if device.processes is not None:
        pids = set(server_pids)
        server = sum(p.used_bytes for p in device.processes if p.pid in pids)
        if pids or not server_running:
            return Split(
                total_bytes=total,
                server_bytes=server,
                desktop_bytes=max(0, used - server),
                free_bytes=free,
                method=SplitMethod.PER_PROCESS,
                detail="Per-process memory from the driver: vLLM's share is the sum over its "
                "process tree; everything else in use is the desktop's.",
                budget_bytes=budget,
                headroom_bytes=headroom,
            )

    if not server_running:
        return Split(
            total_bytes=total,
            server_bytes=0,
            desktop_bytes=used,
            free_bytes=free,
            method=SplitMethod.DERIVED,
            detail="No vLLM server is running: all memory in use is the desktop's.",
            budget_bytes=budget,
            headroom_bytes=headroom,
        )

    if budget is None:
        return Split(
            total_bytes=total,
            server_bytes=None,
            desktop_bytes=None,
            free_bytes=free,
            method=SplitMethod.UNKNOWN,
            detail="The driver gives no per-process memory here and the server's budget is "
            "unknown, so vLLM's share cannot be told apart from the desktop's.",
            budget_bytes=None,
            headroom_bytes=None,
        )

    server = min(used, budget + outside_budget_bytes)
    return Split(
        total_bytes=total,
        server_bytes=server,
        desktop_bytes=max(0, used - server),
        free_bytes=free,
        method=SplitMethod.DERIVED,
        detail=(
            "Derived: the driver gives no per-process memory here (WSL2). vLLM's share is its "
            f"budget ({util:.2f} × {total / GIB:.2f} GiB = {budget / GIB:.2f} GiB) plus an "
            f"estimated {outside_budget_bytes / GIB:.1f} GiB outside it; the rest of the used "
            "memory is the desktop's."
        ),
        budget_bytes=budget,
        headroom_bytes=headroom,
    )


def _headroom(total: int, util: float | None, outside_budget_bytes: int) -> int | None:
    """What the budget leaves the desktop (none below 0), by the rule the what-ifs use."""
    if util is None:
        return None
    return max(0, desktop_headroom_bytes(total, util, outside_budget_bytes))


def split_from_windows(
    device: GpuDevice,
    windows: WindowsGpuReading,
    *,
    util: float | None,
    outside_budget_bytes: int = OUTSIDE_BUDGET_ESTIMATE_BYTES,
) -> Split | None:
    """WSL2 with Windows' counters: the WSL VM's VRAM (vLLM and whatever else runs in WSL)
    against the desktop programs by name. None when the counters give no WSL VM."""
    vm = windows.wsl_vm
    if not windows.available or vm is None:
        return None
    total, used = device.total_bytes, device.used_bytes
    budget = budget_bytes(total, util) if util is not None else None
    server = min(used, vm.dedicated_bytes)
    names = ", ".join(p.name for p in windows.desktop[:3]) or "none"
    spilled = f" {vm.shared_bytes / GIB:.2f} GiB of the VM's GPU memory is in system memory."
    return Split(
        total_bytes=total,
        server_bytes=server,
        desktop_bytes=max(0, used - server),
        free_bytes=max(0, total - used),
        method=SplitMethod.WINDOWS,
        detail=(
            f"From Windows' GPU counters: the WSL VM ({vm.name}) holds vLLM's share "
            f"({vm.dedicated_bytes / GIB:.2f} GiB of VRAM); the rest in use is the desktop's "
            f"(largest: {names}).{spilled}"
        ),
        budget_bytes=budget,
        headroom_bytes=_headroom(total, util, outside_budget_bytes),
    )
