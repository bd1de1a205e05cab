"""Whether the WSL VM spilled: its shared (system-memory) GPU usage over time, and the rise
that says part of the server's memory left the card (AMD feeds its GTT the same way)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace

from vramtop.core.json_types import JsonObject
from vramtop.core.model import MIB
from vramtop.core.windows.reading import WindowsGpuReading

# A rise of the VM's shared usage above its starting level by more than this is a spill.
# Smaller wobbles happen as the driver pages small allocations; a spill that hurts decode is
# gigabytes (the field report's card lost ~2–3 GiB to the desktop).
SPILL_THRESHOLD_BYTES = 256 * MIB
BASELINE_POINTS = 3  # the VM's baseline is the lowest shared usage among its first points


@dataclass(frozen=True)
class VmPoint:
    """The WSL VM's GPU memory at one moment."""

    t: float
    dedicated_bytes: int
    shared_bytes: int


@dataclass(frozen=True)
class SpillEvidence:
    """The WSL VM's shared (system-memory) GPU usage rose: its memory left the card."""

    first_seen_t: float  # when the rise first passed the threshold
    baseline_shared_bytes: int
    shared_bytes: int  # at the latest point
    peak_shared_bytes: int
    rise_bytes: int  # latest − baseline
    dedicated_bytes: int  # at the latest point
    baseline_dedicated_bytes: int
    level: str = "observed"  # the field report's ladder: this rung is now measured
    # Where the spill was seen: "windows" (the WSL VM's shared usage in Windows' counters) or
    # "gtt" (AMD: the server's buffers in GTT, from DRM fdinfo or amdsmi).
    source: str = "windows"

    @property
    def summary(self) -> str:
        if self.source == "gtt":
            return (
                f"The server's memory in GTT (system memory) rose by "
                f"{self.rise_bytes / 1024**3:.2f} GiB to {self.shared_bytes / 1024**3:.2f} GiB "
                f"while it holds {self.dedicated_bytes / 1024**3:.2f} GiB of VRAM: part of its "
                "memory was evicted from VRAM."
            )
        return (
            f"The WSL VM's shared GPU memory (system memory) rose by "
            f"{self.rise_bytes / 1024**3:.2f} GiB to {self.shared_bytes / 1024**3:.2f} GiB "
            f"while its dedicated VRAM is {self.dedicated_bytes / 1024**3:.2f} GiB: part of "
            "the server's memory was moved out of VRAM."
        )

    def as_evidence(self) -> JsonObject:
        """Raw numbers for a finding's `evidence` (bytes, seconds)."""
        if self.source == "gtt":
            return {
                "spill_level": self.level,
                "spill_source": "gtt",
                "spill_first_seen_t": self.first_seen_t,
                "server_gtt_baseline_bytes": self.baseline_shared_bytes,
                "server_gtt_bytes": self.shared_bytes,
                "server_gtt_peak_bytes": self.peak_shared_bytes,
                "server_gtt_rise_bytes": self.rise_bytes,
                "server_vram_bytes": self.dedicated_bytes,
            }
        return {
            "spill_level": self.level,
            "spill_first_seen_t": self.first_seen_t,
            "wsl_vm_shared_baseline_bytes": self.baseline_shared_bytes,
            "wsl_vm_shared_bytes": self.shared_bytes,
            "wsl_vm_shared_peak_bytes": self.peak_shared_bytes,
            "wsl_vm_shared_rise_bytes": self.rise_bytes,
            "wsl_vm_dedicated_bytes": self.dedicated_bytes,
        }


def spill_evidence(
    points: Sequence[VmPoint], threshold_bytes: int = SPILL_THRESHOLD_BYTES
) -> SpillEvidence | None:
    """Evidence when the latest shared usage stands > threshold above the starting baseline.

    A spill is sticky (spilled memory does not come back until the process restarts), so the
    latest point is what counts; `first_seen_t` is when the rise first crossed the threshold
    in the current run of crossings.
    """
    if len(points) < 2:
        return None
    head = points[:BASELINE_POINTS]
    base = min(head, key=lambda p: p.shared_bytes)
    last = points[-1]
    if last.shared_bytes - base.shared_bytes <= threshold_bytes:
        return None
    first = last
    for p in reversed(points):
        if p.shared_bytes - base.shared_bytes <= threshold_bytes:
            break
        first = p
    return SpillEvidence(
        first_seen_t=first.t,
        baseline_shared_bytes=base.shared_bytes,
        shared_bytes=last.shared_bytes,
        peak_shared_bytes=max(p.shared_bytes for p in points),
        rise_bytes=last.shared_bytes - base.shared_bytes,
        dedicated_bytes=last.dedicated_bytes,
        baseline_dedicated_bytes=base.dedicated_bytes,
    )


class SpillTracker:
    """The WSL VM's dedicated and shared usage over time, bounded; restarts on a new VM."""

    def __init__(self, threshold_bytes: int = SPILL_THRESHOLD_BYTES, max_points: int = 3600):
        self.threshold_bytes = threshold_bytes
        self._points: deque[VmPoint] = deque(maxlen=max_points)
        self._head: list[VmPoint] = []  # the first points, kept for the baseline
        self._vm_pid: int | None = None

    def add_point(self, t: float, dedicated_bytes: int, shared_bytes: int) -> None:
        """Feed one point seen another way (AMD: the server's VRAM and GTT)."""
        point = VmPoint(t, dedicated_bytes, shared_bytes)
        self._points.append(point)
        if len(self._head) < BASELINE_POINTS:
            self._head.append(point)

    def add(self, reading: WindowsGpuReading, t: float | None = None) -> None:
        """Feed one reading; readings without a VM (errors, VM not running) are skipped."""
        vm = reading.wsl_vm
        if vm is None:
            return
        if self._vm_pid is not None and vm.pid != self._vm_pid:
            # `wsl --shutdown` and a new VM: the old baseline says nothing about this one.
            self._points.clear()
            self._head = []
        self._vm_pid = vm.pid
        point = VmPoint(reading.t if t is None else t, vm.dedicated_bytes, vm.shared_bytes)
        self._points.append(point)
        if len(self._head) < BASELINE_POINTS:
            self._head.append(point)

    @property
    def series(self) -> tuple[VmPoint, ...]:
        return tuple(self._points)

    def spill_evidence(self, source: str = "windows") -> SpillEvidence | None:
        # The head keeps the baseline even after the bounded series dropped its first points.
        points = list(self._points)
        if self._head and points and points[0] is not self._head[0]:
            points = self._head + points
        found = spill_evidence(points, self.threshold_bytes)
        return replace(found, source=source) if found is not None else None
