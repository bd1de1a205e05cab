"""The Windows side of the simulated machine, for `vramtop --demo --wsl`.

Same interface as `sources.windows_counters.WindowsGpuSource` (`read()`, `close()`), fed by
the world daemon's `state`: the desktop apps become Windows processes (the scenario already
names them `dwm.exe`, `msedge.exe`, `ms-teams.exe`), and every non-desktop allocation — the
servers running inside WSL — is charged to one `vmmemWSL` entry whose dedicated usage is
what stays on the card and whose shared usage is what the world spilled. So a call shows the
VM's shared usage climbing, exactly the signal the real counters give.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from vramtop.core.model import MIB
from vramtop.core.windows.attribution import attribute
from vramtop.core.windows.reading import WindowsGpuReading, unavailable
from vramtop.sim.world_protocol import WorldClient, WorldRequests, WorldUnreachable
from vramtop.sim.world_state import WorldState

NVIDIA_LUID = "0x00000000_0x0000C3F1"
VM_PID = 5520  # Windows pids are small multiples of 4
VM_BASE_SHARED_BYTES = 120 * MIB  # the VM's shared usage before any spill (page tables, rings)
DESKTOP_SHARED_BYTES = 4 * MIB
_FIRST_DESKTOP_PID = 1232


def reading_from_state(state: WorldState, t: float) -> WindowsGpuReading:
    """The world's `state` answer as the Windows counters would show it (pure)."""
    rows: list[dict[str, str | int]] = []
    names: dict[int, str] = {}
    for i, app in enumerate(state.get("desktop") or []):
        pid = _FIRST_DESKTOP_PID + 4 * i
        names[pid] = str(app.get("name", f"app{i}")).removesuffix(".exe")
        rows.append(_row(pid, int(app.get("demand_bytes", 0)), DESKTOP_SHARED_BYTES))
    spilled = {int(s["pid"]): int(s.get("spilled_bytes", 0)) for s in state.get("servers") or []}
    vm_dedicated = sum(
        int(p.get("used_bytes", 0))
        for p in state.get("processes") or []
        if p.get("kind") != "desktop"
    )
    rows.append(_row(VM_PID, vm_dedicated, VM_BASE_SHARED_BYTES + sum(spilled.values())))
    names[VM_PID] = "vmmemWSL"
    dedicated = sum(int(r["DedicatedUsage"]) for r in rows)
    shared = sum(int(r["SharedUsage"]) for r in rows)
    adapter = {
        "Name": f"luid_{NVIDIA_LUID}_phys_0",
        "DedicatedUsage": dedicated,
        "SharedUsage": shared,
        "TotalCommitted": dedicated + shared,
    }
    return attribute(rows, [adapter], names, t, source="sim")


def _row(pid: int, dedicated: int, shared: int) -> dict[str, str | int]:
    return {
        "Name": f"pid_{pid}_luid_{NVIDIA_LUID}_phys_0",
        "DedicatedUsage": dedicated,
        "SharedUsage": shared,
        "TotalCommitted": dedicated + shared,
    }


class SimWindowsSource:
    """Asks the world daemon on each `read()` (a local socket: milliseconds)."""

    def __init__(
        self,
        world_socket: str | Path,
        *,
        timeout_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        client: WorldRequests | None = None,
    ) -> None:
        """`client`: what answers the world's requests (default: the world at `world_socket`;
        a test passes the `World` it runs in its own process)."""
        self._client: WorldRequests = client or WorldClient(world_socket, timeout_s=timeout_s)
        self._clock = clock
        self._closed = False

    def start(self) -> None:
        """Nothing to start: present for the same interface as the PowerShell source."""

    def read(self) -> WindowsGpuReading:
        now = self._clock()
        if self._closed:
            return unavailable("the simulated Windows side is closed", now, source="sim")
        try:
            state = self._client.request("state")
        except WorldUnreachable as exc:
            return unavailable(f"the simulated machine is not answering ({exc})", now, "sim")
        if not state.get("ok", False):
            return unavailable(str(state.get("error", "simulated machine error")), now, "sim")
        try:
            return reading_from_state(cast(WorldState, state), now)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            return unavailable(f"the simulated machine gave an unreadable state: {exc}", now, "sim")

    def close(self) -> None:
        self._closed = True
