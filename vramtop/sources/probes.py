"""The GPU probe interface, and the choice of probe for this machine.

A probe reads every device once per `read()` into a `GpuReading` and never raises: a missing
library or driver is a reading with a reason. The probes:
- `nvml` (NvmlProbe): NVIDIA cards through NVML. Unified memory is recognised on its own, but
  only on both signs together (NOT_SUPPORTED for the device's memory on a known integrated
  device).
- `nvml-unified` (UnifiedMemoryProbe): NVIDIA on one memory pool shared with the CPU (DGX
  Spark): NOT_SUPPORTED alone is taken as the sign, and the pool is read from /proc/meminfo.
- `amd` (AmdProbe): AMD cards through amdsmi when it imports and works, else sysfs and DRM
  fdinfo; `amd-sysfs` never tries amdsmi.
- the simulated GPU (`SimGpuProbe`), which `--demo` uses.
`auto` (the default; `gpu_probe` in config.toml overrides it) takes NVML when it finds an NVIDIA
device, else AMD when a card with the amdgpu driver is there, else NVML (whose reading then
says why there is no GPU).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from vramtop.core.model import GpuReading
from vramtop.sources.amd import DRM_ROOT, PROC_ROOT, AmdProbe, amd_cards
from vramtop.sources.host import MEMINFO
from vramtop.sources.nvml import NvmlProbe, UnifiedMemoryProbe

PROBE_CHOICES: tuple[str, ...] = ("auto", "nvml", "nvml-unified", "amd", "amd-sysfs")


class GpuProbe(Protocol):
    """What the monitor reads the GPU through."""

    name: str

    def read(self) -> GpuReading: ...

    def close(self) -> None: ...


def nvidia_present(nvml: ModuleType | Any | None = None) -> bool:
    """True when NVML initialises and counts at least one device."""
    if nvml is None:
        try:
            import pynvml  # type: ignore[import-untyped]
        except ImportError:
            return False
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except Exception:
        return False
    try:
        return int(nvml.nvmlDeviceGetCount()) > 0
    except Exception:
        return False
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()  # each nvmlInit is counted: the probe initialises its own


def choose_probe(
    setting: str = "auto",
    *,
    nvml: ModuleType | Any | None = None,
    amdsmi: ModuleType | Any | None = None,
    drm_root: Path = DRM_ROOT,
    proc_root: Path = PROC_ROOT,
    meminfo: Path = MEMINFO,
) -> NvmlProbe | AmdProbe:
    """The probe `setting` names (one of PROBE_CHOICES); `auto` looks at the machine."""
    if setting not in PROBE_CHOICES:
        raise ValueError(f"unknown GPU probe {setting!r}; choose one of {', '.join(PROBE_CHOICES)}")
    if setting == "auto":
        setting = "amd" if not nvidia_present(nvml) and amd_cards(drm_root) else "nvml-auto"
    if setting == "amd":
        return AmdProbe(amdsmi, drm_root=drm_root, proc_root=proc_root)
    if setting == "amd-sysfs":
        return AmdProbe(use_amdsmi=False, drm_root=drm_root, proc_root=proc_root)
    if setting == "nvml-unified":
        return UnifiedMemoryProbe(nvml, meminfo=meminfo)
    # "nvml" as set by the user: dedicated memory only; chosen by "auto": unified recognised.
    return NvmlProbe(nvml, unified=False if setting == "nvml" else None, meminfo=meminfo)


def configured_probe() -> NvmlProbe | AmdProbe:
    """The probe config.toml's `gpu_probe` asks for (`auto` when the file is unusable: the
    commands that read it report that themselves)."""
    from vramtop.config import ConfigError, load_settings

    try:
        setting = load_settings().gpu_probe
    except ConfigError:
        setting = "auto"
    return choose_probe(setting)
