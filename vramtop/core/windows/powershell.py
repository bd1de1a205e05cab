"""The PowerShell loop's output read: one JSON line in, one `WindowsGpuReading` out.

The WSL VM's spill over time is in `spill`; which process is whose, in `attribution`.

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
from collections.abc import Mapping

from vramtop.core.windows.attribution import attribute
from vramtop.core.windows.reading import WindowsGpuReading, json_list, unavailable


def parse_line(line: str, t: float) -> WindowsGpuReading:
    """One line of the PowerShell loop's output as a reading (never raises)."""
    text = line.strip().lstrip("\ufeff")
    if not text:
        return unavailable("PowerShell printed an empty line", t)
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):  # (nested deeper than the parser recurses)
        return unavailable(f"PowerShell printed something that is not JSON: {text[:60]!r}", t)
    if not isinstance(obj, dict):
        return unavailable(f"PowerShell printed unexpected JSON: {text[:60]!r}", t)
    return reading_from_json(obj, t)


def reading_from_json(obj: Mapping[str, object], t: float) -> WindowsGpuReading:
    """The loop's object: {"processes": [...], "adapters": [...], "names": {pid: name}}."""
    if obj.get("error"):
        return unavailable(describe_powershell_error(str(obj["error"])), t)
    rows = [r for r in json_list(obj.get("processes")) if isinstance(r, dict)]
    adapter_rows = [r for r in json_list(obj.get("adapters")) if isinstance(r, dict)]
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
