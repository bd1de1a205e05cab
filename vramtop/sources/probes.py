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
import threading
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Protocol

from vramtop.core.model import GpuReading
from vramtop.settings import GPU_PROBES
from vramtop.sources.amd import DRM_ROOT, AmdProbe, amd_cards
from vramtop.sources.amd_fdinfo import PROC_ROOT
from vramtop.sources.host import MEMINFO
from vramtop.sources.nvml import NvmlProbe, UnifiedMemoryProbe

PROBE_CHOICES = GPU_PROBES


class GpuProbe(Protocol):
    """What the monitor reads the GPU through."""

    @property
    def name(self) -> str: ...

    def read(self) -> GpuReading: ...

    def close(self) -> None: ...


def nvidia_present(nvml: ModuleType | None = None) -> bool:
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
    nvml: ModuleType | None = None,
    amdsmi: ModuleType | None = None,
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


class DeferredProbe:
    """The probe `setting` names, chosen at its first read rather than when it is made.

    Choosing loads the GPU library and initialises it (`auto` looks at the machine): the
    console makes its probe before its first frame and reads it after, in its reader."""

    def __init__(
        self,
        setting: str = "auto",
        *,
        nvml: ModuleType | None = None,
        amdsmi: ModuleType | None = None,
        drm_root: Path = DRM_ROOT,
        proc_root: Path = PROC_ROOT,
        meminfo: Path = MEMINFO,
    ) -> None:
        if setting not in PROBE_CHOICES:
            choose_probe(setting)  # raises the same ValueError, now
        self._setting = setting
        # choose_probe, given the libraries and paths it looks at
        self._choose = partial(
            choose_probe,
            setting,
            nvml=nvml,
            amdsmi=amdsmi,
            drm_root=drm_root,
            proc_root=proc_root,
            meminfo=meminfo,
        )
        self._probe: NvmlProbe | AmdProbe | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._setting if self._probe is None else self._probe.name

    def chosen(self) -> NvmlProbe | AmdProbe:
        with self._lock:
            if self._probe is None:
                self._probe = self._choose()
            return self._probe

    def read(self) -> GpuReading:
        return self.chosen().read()

    def close(self) -> None:
        with self._lock:
            if self._probe is not None:
                self._probe.close()


def configured_probe() -> NvmlProbe | AmdProbe:
    """The probe config.toml's `gpu_probe` asks for (`auto` when the file is unusable: the
    commands that read it report that themselves)."""
    from vramtop.settings import ConfigError, load_settings

    try:
        setting = load_settings().gpu_probe
    except ConfigError:
        setting = "auto"
    return choose_probe(setting)
