"""The simulated GPU read like NVML: one batched `state` request per tick.

Presents itself the Linux way (per-process memory listed) or the WSL2 way (device totals only;
per-process memory "not available", i.e. `processes=None`; the kernel's residency failures
counted, as `NvmlProbe` counts them from /dev/kmsg).
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from vramtop.core.model import GpuDevice, GpuReading, MemoryKind, ProcessMemory
from vramtop.sim.world_protocol import WorldClient, WorldRequests, WorldUnreachable
from vramtop.sim.world_state import WorldState


class SimGpuProbe:
    """Reads the simulated card; never raises (an unreachable world is a reading with a reason)."""

    name = "sim"

    def __init__(
        self,
        socket_path: Path,
        wsl: bool = False,
        timeout_s: float = 1.0,
        client: WorldRequests | None = None,
    ) -> None:
        """`client`: what answers the world's requests (default: the world at `socket_path`;
        a test passes the `World` it runs in its own process)."""
        self.socket_path = Path(socket_path)
        self.wsl = wsl
        self._client: WorldRequests = client or WorldClient(self.socket_path, timeout_s)
        # Whether a simulated call was on at the last read (the same answer carries it): the
        # demo's header shows it without asking the simulated machine a second time a tick.
        self.call_on = False
        # The world's running total of residency failures at the previous read: a reading
        # carries the lines since then, as the kernel log's reader does.
        self._residency_seen: int | None = None

    def read(self) -> GpuReading:
        try:
            # The world's answer, parsed from JSON: a key missing or of another type is an
            # unreadable state below.
            state = cast(WorldState, self._client.request("state"))
            self.call_on = bool(state.get("call_on", False))
            device = self._device(state)
            residency = self._residency(state["device"].get("residency_failures_total"))
            return GpuReading(devices=(device,), source="sim", residency_failures=residency)
        except WorldUnreachable as exc:
            self.call_on = False  # no simulated machine, no call on it
            return GpuReading(source="sim", error=f"simulated GPU not reachable: {exc}")
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
            return GpuReading(source="sim", error=f"simulated GPU gave an unreadable state: {exc}")

    def close(self) -> None:
        """Nothing to release: each read is one request on its own connection."""

    def _device(self, state: WorldState) -> GpuDevice:
        dev = state["device"]
        processes = None
        if not self.wsl:
            # Processes that use only system memory (unified memory) are not GPU processes.
            # A Linux desktop's: a Windows program of the scenario by its Linux name.
            processes = tuple(
                ProcessMemory(
                    int(p["pid"]),
                    str(p.get("linux_name") or p["name"]),
                    int(p["used_bytes"]),
                    gtt_bytes=int(p["gtt_bytes"]) if "gtt_bytes" in p else None,
                )
                for p in state["processes"]
                if p.get("gpu", True)
            )
        return GpuDevice(
            index=int(dev["index"]),
            name=str(dev["name"]),
            total_bytes=int(dev["total_bytes"]),
            used_bytes=int(dev["used_bytes"]),
            free_bytes=int(dev["free_bytes"]),
            temperature_c=int(dev["temperature_c"]),
            sm_clock_mhz=int(dev["sm_clock_mhz"]),
            throttle=tuple(str(r) for r in dev["throttle"]),
            processes=processes,
            memory_kind=MemoryKind(dev.get("memory_kind", "dedicated")),
            gtt_total_bytes=_optional_int(dev.get("gtt_total_bytes")),
            gtt_used_bytes=_optional_int(dev.get("gtt_used_bytes")),
            pcie_rx_bytes_per_s=_optional_int(dev.get("pcie_rx_bytes_per_s")),
            pcie_tx_bytes_per_s=_optional_int(dev.get("pcie_tx_bytes_per_s")),
            gpu_util=_optional_float(dev.get("gpu_util")),
            memory_util=_optional_float(dev.get("memory_util")),
        )

    def _residency(self, total: int | None) -> int | None:
        """New failures since the previous read; None off WSL2 or where the card has none
        (0 at the first read, and after the world started again: its total went back)."""
        if not self.wsl or total is None:
            return None
        now = int(total)
        seen, self._residency_seen = self._residency_seen, now
        if seen is None or now < seen:
            return 0
        return now - seen


def _optional_int(value: int | None) -> int | None:
    return None if value is None else int(value)


def _optional_float(value: float | None) -> float | None:
    return None if value is None else float(value)
