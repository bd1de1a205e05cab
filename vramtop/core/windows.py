"""The Windows side of a WSL2 machine: who holds the card, and whether the WSL VM spilled.

Pure: a JSON line printed by the PowerShell loop (`sources/windows_counters.py`) goes in,
frozen values come out; time is passed in. Under WSL2, NVML shows the card's totals but no
process, so the desktop's share can only be derived. Windows charges every GPU allocation to
a Windows process, and its `GPU Process Memory` counters split each process's memory into
*dedicated* (in VRAM) and *shared* (system memory the GPU reads over PCIe). The WSL VM's
shared usage growing while the desktop takes VRAM is the direct evidence of a spill.

Shapes (cited where they come from):
- Process instances are named `pid_<PID>_luid_<HIGH>_<LOW>_phys_<N>` and adapter instances
  `luid_<HIGH>_<LOW>_phys_<N>` (optionally `_part_<N>`): windows_exporter's GPU collector
  parses exactly these (prometheus-community/windows_exporter,
  internal/collector/gpu/utils.go and its test).
- Properties of `Win32_PerfFormattedData_GPUPerformanceCounters_GPUProcessMemory`:
  Name, DedicatedUsage, SharedUsage, LocalUsage, NonLocalUsage, TotalCommitted; of
  `..._GPUAdapterMemory`: Name, DedicatedUsage, SharedUsage, TotalCommitted (windows_exporter
  docs/collector.gpu.md; public PowerShell scripts that select these properties by name).
  One public script notes that per-process DedicatedUsage can disagree with LocalUsage
  (what sits in VRAM); we keep LocalUsage when present and prefer it for "dedicated".
- `Get-Process` names have no `.exe` (`dwm`, `msedge`, `vmmemWSL`); Task Manager's Details
  tab shows `dwm.exe` but `vmmemWSL`. We show names the Task Manager way.
- The WSL VM: on Windows 11 a running distro's VM is the process `vmmemWSL`; a bare `vmmem`
  there is another Hyper-V guest (Sandbox, VBS), while Windows 10 names WSL's VM `vmmem`
  (microsoft/WSL issue 6881). GPU-PV allocations made inside the VM are expected to be
  charged to that process; no public source we found shows its GPU counters explicitly, so
  attribution prefers `vmmemWSL`, falls back to `vmmem`, and says which name it used.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from vramtop.core.model import MIB

UNAVAILABLE_PREFIX = "Windows side not available"
# Windows 11 first, then Windows 10's name (see the module docstring).
WSL_VM_NAMES = ("vmmemWSL", "vmmem")
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
# A rise of the VM's shared usage above its starting level by more than this is a spill.
# Smaller wobbles happen as the driver pages small allocations; a spill that hurts decode is
# gigabytes (the field report's card lost ~2–3 GiB to the desktop).
SPILL_THRESHOLD_BYTES = 256 * MIB
BASELINE_POINTS = 3  # the VM's baseline is the lowest shared usage among its first points

SYSMEM_FALLBACK_ADVICE = (
    "NVIDIA driver 546.01 and later can refuse to spill CUDA memory into system memory: "
    'NVIDIA Control Panel → Manage 3D settings → "CUDA - Sysmem Fallback Policy" → '
    '"Prefer No Sysmem Fallback" (set it globally or for the program). A spill then becomes '
    "an out-of-memory error instead of a silent slowdown. Caveat: WSL2 has been reported to "
    "ignore this setting (microsoft/WSL issue 11050), so leaving the desktop headroom with a "
    "lower --gpu-memory-utilization is still the dependable fix."
)

_PROCESS_NAME = re.compile(r"^pid_(\d+)_luid_(0x[0-9A-Fa-f]+_0x[0-9A-Fa-f]+)_phys_(\d+)")
_ADAPTER_NAME = re.compile(r"^luid_(0x[0-9A-Fa-f]+_0x[0-9A-Fa-f]+)_phys_(\d+)")


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


# --- parsing ---------------------------------------------------------------------------------
def windows_name(name: str) -> str:
    """`dwm` → `dwm.exe` as Task Manager shows it; `vmmemWSL` and `System` stay bare."""
    name = name.strip()
    if not name or name.lower().endswith(".exe") or name.lower() in _NO_EXE:
        return name
    return f"{name}.exe"


def _as_list(value: Any) -> list[Any]:
    # ConvertTo-Json turns a one-element array into the bare object, and $null into null.
    if value is None:
        return []
    if isinstance(value, list):
        return value
    return [value]


def _as_bytes(value: Any) -> int:
    # Formatted perf counters are uint64; CIM may hand them over as numbers or as strings,
    # and a driver glitch can make one negative: clamp rather than wrap.
    if isinstance(value, bool) or value is None:
        return 0
    try:
        number = int(float(value)) if isinstance(value, str) else int(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return max(0, number)


def parse_line(line: str, t: float) -> WindowsGpuReading:
    """One line of the PowerShell loop's output as a reading (never raises)."""
    text = line.strip().lstrip("\ufeff")
    if not text:
        return unavailable("PowerShell printed an empty line", t)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return unavailable(f"PowerShell printed something that is not JSON: {text[:60]!r}", t)
    if not isinstance(obj, dict):
        return unavailable(f"PowerShell printed unexpected JSON: {text[:60]!r}", t)
    return reading_from_json(obj, t)


def reading_from_json(obj: Mapping[str, Any], t: float) -> WindowsGpuReading:
    """The loop's object: {"processes": [...], "adapters": [...], "names": {pid: name}}."""
    if obj.get("error"):
        return unavailable(describe_powershell_error(str(obj["error"])), t)
    rows = [r for r in _as_list(obj.get("processes")) if isinstance(r, dict)]
    adapter_rows = [r for r in _as_list(obj.get("adapters")) if isinstance(r, dict)]
    names_obj = obj.get("names")
    names: dict[int, str] = {}
    if isinstance(names_obj, dict):
        for key, value in names_obj.items():
            # isdecimal, not isdigit: "¹" is a digit that int() refuses.
            if str(key).isascii() and str(key).isdecimal() and isinstance(value, str):
                names[int(key)] = value
    if not rows and not adapter_rows:
        return unavailable(
            "Windows reports no GPU memory counters (the GPU performance counters arrive with "
            "Windows 10 1709 and a WDDM 2.x driver)",
            t,
        )
    return attribute(rows, adapter_rows, names, t)


def describe_powershell_error(message: str) -> str:
    """A CIM or PowerShell error message turned into something a user can act on."""
    low = message.lower()
    if "invalid class" in low or ("not found" in low and "class" in low):
        return (
            "this Windows build has no GPU performance counters (class "
            "GPUPerformanceCounters not found; they need Windows 10 1709 or later)"
        )
    if re.search(r"execution[ _]?polic", low):
        return f"PowerShell's execution policy refused the script: {message.strip()[:120]}"
    if "access" in low and "denied" in low:
        return f"Windows denied access to the GPU counters: {message.strip()[:120]}"
    return f"the GPU counter query failed: {message.strip()[:160]}"


# --- attribution -----------------------------------------------------------------------------
def parse_process_instance(name: str) -> tuple[int, str] | None:
    """`pid_1234_luid_0x00000000_0x0000C3F1_phys_0` → (1234, "0x00000000_0x0000C3F1")."""
    m = _PROCESS_NAME.match(name)
    return (int(m.group(1)), m.group(2).lower()) if m else None


def parse_adapter_instance(name: str) -> str | None:
    m = _ADAPTER_NAME.match(name)
    return m.group(1).lower() if m else None


def _dedicated(row: Mapping[str, Any]) -> int:
    # LocalUsage is what sits in the adapter's own memory; older builds lack it.
    local = row.get("LocalUsage")
    return _as_bytes(local) if local is not None else _as_bytes(row.get("DedicatedUsage"))


def _shared(row: Mapping[str, Any]) -> int:
    non_local = row.get("NonLocalUsage")
    return _as_bytes(non_local) if non_local is not None else _as_bytes(row.get("SharedUsage"))


def merge_adapters(rows: Iterable[Mapping[str, Any]]) -> tuple[WindowsAdapterGpu, ...]:
    """Adapter instances summed per luid (a card may report several `phys`/`part` rows)."""
    totals: dict[str, list[int]] = {}
    for row in rows:
        luid = parse_adapter_instance(str(row.get("Name", "")))
        if luid is None:
            continue
        acc = totals.setdefault(luid, [0, 0, 0])
        acc[0] += _as_bytes(row.get("DedicatedUsage"))
        acc[1] += _as_bytes(row.get("SharedUsage"))
        acc[2] += _as_bytes(row.get("TotalCommitted"))
    return tuple(WindowsAdapterGpu(luid, d, s, c) for luid, (d, s, c) in totals.items())


def choose_adapter(
    adapters: Sequence[WindowsAdapterGpu], process_rows: Iterable[Mapping[str, Any]] = ()
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
    process_rows: Iterable[Mapping[str, Any]],
    adapter_rows: Iterable[Mapping[str, Any]],
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


# --- spill evidence --------------------------------------------------------------------------
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

    def as_evidence(self) -> dict[str, Any]:
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


# --- the session format ----------------------------------------------------------------------
def windows_sample_fields(reading: WindowsGpuReading | None) -> dict[str, Any]:
    """The optional `windows` field of a sample line (merge it into the line's dict).

    Unknown → no field at all; a failed source → {"windows": {"error": reason}} so a recording
    says why the numbers are missing.
    """
    if reading is None:
        return {}
    if reading.error is not None:
        return {"windows": {"error": reading.error}}
    body: dict[str, Any] = {
        "wsl_vm_dedicated_bytes": reading.wsl_vm.dedicated_bytes if reading.wsl_vm else None,
        "wsl_vm_shared_bytes": reading.wsl_vm.shared_bytes if reading.wsl_vm else None,
        "desktop": [
            {
                "pid": p.pid,
                "name": p.name,
                "dedicated_bytes": p.dedicated_bytes,
                "shared_bytes": p.shared_bytes,
            }
            for p in reading.desktop
        ],
    }
    if reading.wsl_vm is not None:
        body["wsl_vm_name"] = reading.wsl_vm.name
    return {"windows": body}


def reading_from_sample(line: Mapping[str, Any]) -> WindowsGpuReading | None:
    """A recorded sample line's `windows` field back as a reading (None when absent)."""
    body = line.get("windows")
    t = float(line.get("t", 0.0) or 0.0)
    if not isinstance(body, dict):
        return None
    if body.get("error"):
        return unavailable(str(body["error"]), t, source="recording")
    vm = None
    if body.get("wsl_vm_dedicated_bytes") is not None:
        vm = WindowsProcessGpu(
            pid=0,
            name=str(body.get("wsl_vm_name") or WSL_VM_NAMES[0]),
            dedicated_bytes=_as_bytes(body.get("wsl_vm_dedicated_bytes")),
            shared_bytes=_as_bytes(body.get("wsl_vm_shared_bytes")),
        )
    desktop = tuple(
        WindowsProcessGpu(
            _as_bytes(d.get("pid")),
            str(d.get("name", "")),
            _as_bytes(d.get("dedicated_bytes")),
            _as_bytes(d.get("shared_bytes")),
        )
        for d in _as_list(body.get("desktop"))
        if isinstance(d, dict)
    )
    return WindowsGpuReading(wsl_vm=vm, desktop=desktop, t=t, source="recording")


# --- the vram_contention finding -------------------------------------------------------------
# Words that mark the ladder's spill rung ("… lost VRAM residency and is served from system
# memory …"): when the Windows counters show the spill, that rung is no longer a hypothesis.
_SPILL_RUNG_WORDS = ("residency", "system memory", "spill")


def cite_spill(
    ladder: Mapping[str, Sequence[str]],
    evidence: Mapping[str, Any],
    spill: SpillEvidence | None,
) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """A finding's ladder and evidence with the spill cited as observed, when there is one.

    Without evidence both come back unchanged (as fresh copies). With it, the spill sentence
    joins "observed" with its numbers, the hypothesis about residency is dropped, and what is
    still not measured — that the PCIe reads are what slows decoding — moves to "inferred".
    """
    out = {k: list(v) for k, v in ladder.items()}
    ev = dict(evidence)
    if spill is None:
        return out, ev
    rise, now = spill.rise_bytes / 1024**3, spill.shared_bytes / 1024**3
    out.setdefault("observed", []).append(
        f"amdgpu: vLLM's buffers in GTT (system memory) rose by {rise:.2f} GiB to {now:.2f} "
        f"GiB since t={spill.first_seen_t:.0f} s: part of vLLM's memory was evicted from VRAM"
        if spill.source == "gtt"
        else f"Windows counters: the WSL VM's shared GPU memory (system memory) rose by "
        f"{rise:.2f} GiB to {now:.2f} GiB since t={spill.first_seen_t:.0f} s: part of vLLM's "
        "memory left the card"
    )
    out["hypothesis"] = [
        h for h in out.get("hypothesis", []) if not any(w in h.lower() for w in _SPILL_RUNG_WORDS)
    ]
    out.setdefault("inferred", []).append(
        "decode steps read the spilled memory over PCIe, which explains the slowdown"
    )
    ev.update(spill.as_evidence())
    return out, ev
