"""The GPU probe for AMD cards on Linux (amdgpu, ROCm): amdsmi where it works, sysfs otherwise.

The card: ROCm's `amdsmi` Python package when it imports and initialises; else the amdgpu
driver's sysfs files (`/sys/class/drm/cardN/device/mem_info_vram_total|used`,
`mem_info_gtt_total|used`, in bytes). Per process: amdsmi's process list when it gives memory
numbers, else DRM fdinfo the way nvtop reads it (`amd_fdinfo`).

GTT is system memory the card maps. Buffers the driver evicts from a full VRAM land there, so
the server's GTT growing while it slows is the direct evidence of a spill, like the WSL VM's
shared usage on Windows.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from vramtop.core.model import GpuDevice, GpuReading, ProcessMemory
from vramtop.sources.amd_fdinfo import PROC_ROOT, FdinfoIndex, FdinfoScan, processes_from

log = logging.getLogger(__name__)

T = TypeVar("T")
DRM_ROOT = Path("/sys/class/drm")
AMD_VENDOR = "0x1002"
_CARD = re.compile(r"^card\d+$")


# --- sysfs -------------------------------------------------------------------------------------
def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text, 0) if text else None
    except ValueError:
        return None


def card_pdev(device_dir: Path) -> str:
    """The card's PCI address (from its uevent, else the name its symlink points at)."""
    for line in (_read(device_dir / "uevent") or "").splitlines():
        if line.startswith("PCI_SLOT_NAME="):
            return line.partition("=")[2]
    return Path(os.path.realpath(device_dir)).name


def amd_cards(drm_root: Path = DRM_ROOT) -> list[Path]:
    """The `device` directories of AMD cards whose driver reports VRAM, in card order."""
    try:
        names = sorted(
            (n for n in os.listdir(drm_root) if _CARD.match(n)), key=lambda n: int(n[4:])
        )
    except OSError:
        return []
    cards = []
    for name in names:
        device = drm_root / name / "device"
        if _read(device / "vendor") == AMD_VENDOR and (device / "mem_info_vram_total").exists():
            cards.append(device)
    return cards


def _temperature(device_dir: Path) -> int | None:
    try:
        hwmons = sorted((device_dir / "hwmon").iterdir())
    except OSError:
        return None
    for hwmon in hwmons:
        millideg = _read_int(hwmon / "temp1_input")
        if millideg is not None:
            return millideg // 1000
    return None


def _sclk_mhz(device_dir: Path) -> int | None:
    """The current shader clock: the line of pp_dpm_sclk marked with '*'."""
    for line in (_read(device_dir / "pp_dpm_sclk") or "").splitlines():
        if line.rstrip().endswith("*"):
            match = re.search(r"(\d+)\s*mhz", line, re.IGNORECASE)
            if match:
                return int(match.group(1))
    return None


def sysfs_device(index: int, device_dir: Path, scan: FdinfoScan | None) -> GpuDevice | None:
    total = _read_int(device_dir / "mem_info_vram_total")
    used = _read_int(device_dir / "mem_info_vram_used")
    if total is None or used is None:
        return None
    pdev = card_pdev(device_dir)
    name = _read(device_dir / "product_name") or f"AMD Radeon ({pdev})"
    per_pid = scan.by_pdev.get(pdev, {}) if scan is not None else None
    return GpuDevice(
        index=index,
        name=name,
        total_bytes=total,
        used_bytes=used,
        free_bytes=max(0, total - used),
        temperature_c=_temperature(device_dir),
        sm_clock_mhz=_sclk_mhz(device_dir),
        processes=processes_from(per_pid) if per_pid is not None else None,
        gtt_total_bytes=_read_int(device_dir / "mem_info_gtt_total"),
        gtt_used_bytes=_read_int(device_dir / "mem_info_gtt_used"),
    )


# --- the probe ---------------------------------------------------------------------------------
class AmdProbe:
    """Reads every AMD card once per `read()`. Thread-safe; never raises.

    `use_amdsmi`: None tries amdsmi and falls back to sysfs when it does not import or work;
    False reads sysfs only. `amdsmi` may be given (tests pass a fake module)."""

    name = "amd"

    def __init__(
        self,
        amdsmi: ModuleType | None = None,
        *,
        use_amdsmi: bool | None = None,
        drm_root: Path = DRM_ROOT,
        proc_root: Path = PROC_ROOT,
    ) -> None:
        self._amdsmi = amdsmi
        self._use_amdsmi = use_amdsmi
        self._drm_root = drm_root
        self._lock = threading.Lock()
        self._amdsmi_ready = False
        self._index = FdinfoIndex(proc_root)
        self.amdsmi_error: str | None = None  # why amdsmi is not used (for `vramtop doctor`)
        self.denied_pids = 0  # processes whose fdinfo was not readable at the last read

    def read(self) -> GpuReading:
        with self._lock:
            try:
                if self._amdsmi_init():
                    reading = self._read_amdsmi()
                    if reading is not None:
                        return reading
                return self._read_sysfs()
            except Exception as exc:  # a driver bug: one bad tick, not a crash
                log.exception("AMD read failed")
                return GpuReading(source="sysfs", error=f"AMD GPU read failed: {exc}")

    def close(self) -> None:
        with self._lock:
            if self._amdsmi_ready and self._amdsmi is not None:
                self._call(self._amdsmi.amdsmi_shut_down, None)
            self._amdsmi_ready = False

    # -- amdsmi ---------------------------------------------------------------------------------
    def _amdsmi_init(self) -> bool:
        if self._use_amdsmi is False or self.amdsmi_error is not None:
            return False
        if self._amdsmi_ready:
            return True
        if self._amdsmi is None:
            try:
                import amdsmi  # type: ignore[import-not-found]
            except Exception as exc:  # ImportError, or its library missing (OSError, KeyError)
                self.amdsmi_error = f"the amdsmi package does not import ({exc})"
                return False
            self._amdsmi = amdsmi
        try:
            self._amdsmi.amdsmi_init()
        except Exception as exc:
            self.amdsmi_error = f"amdsmi does not initialise ({exc})"
            return False
        self._amdsmi_ready = True
        return True

    def _read_amdsmi(self) -> GpuReading | None:
        """The cards through amdsmi; None (and sysfs from now on) when it stops working."""
        smi = self._amdsmi
        assert smi is not None
        try:
            handles = list(smi.amdsmi_get_processor_handles())
            memory = smi.AmdSmiMemoryType
            cards = [
                (
                    handle,
                    int(smi.amdsmi_get_gpu_memory_total(handle, memory.VRAM)),
                    int(smi.amdsmi_get_gpu_memory_usage(handle, memory.VRAM)),
                )
                for handle in handles
            ]
        except Exception as exc:
            self.amdsmi_error = f"amdsmi cannot read the card's memory ({exc})"
            self._call(smi.amdsmi_shut_down, None)
            self._amdsmi_ready = False
            return None
        if not cards:
            self.amdsmi_error = "amdsmi finds no AMD GPU"
            return None
        scan: FdinfoScan | None = None
        devices = []
        for index, (handle, total, used) in enumerate(cards):
            processes = self._amdsmi_processes(handle)
            if processes is None:
                if scan is None:
                    scan = self._index.scan()
                    self.denied_pids = scan.denied_pids
                bdf = self._call(partial(smi.amdsmi_get_gpu_device_bdf, handle), "")
                processes = processes_from(scan.by_pdev.get(str(bdf), {}))
            asic: object = self._call(partial(smi.amdsmi_get_gpu_asic_info, handle), {})
            name = asic.get("market_name") if isinstance(asic, dict) else None
            devices.append(
                GpuDevice(
                    index=index,
                    name=str(name or "AMD GPU"),
                    total_bytes=total,
                    used_bytes=used,
                    free_bytes=max(0, total - used),
                    temperature_c=self._amdsmi_temperature(handle),
                    processes=processes,
                    gtt_total_bytes=self._gtt(smi.amdsmi_get_gpu_memory_total, handle),
                    gtt_used_bytes=self._gtt(smi.amdsmi_get_gpu_memory_usage, handle),
                )
            )
        return GpuReading(devices=tuple(devices), source="amdsmi")

    def _gtt(self, getter: Callable[[object, object], object], handle: object) -> int | None:
        smi = self._amdsmi
        assert smi is not None
        value = self._call(partial(getter, handle, smi.AmdSmiMemoryType.GTT), None)
        return int(value) if isinstance(value, int) else None

    def _amdsmi_processes(self, handle: object) -> tuple[ProcessMemory, ...] | None:
        """Per-process VRAM and GTT from amdsmi; None when its list carries no memory numbers
        (older releases return handles to look up one by one: fdinfo answers instead)."""
        smi = self._amdsmi
        assert smi is not None
        entries = self._call(lambda: smi.amdsmi_get_gpu_process_list(handle), None)
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            return None
        per_pid: dict[int, tuple[int, int]] = {}
        for entry in entries:
            usage = entry.get("memory_usage")
            if not isinstance(usage, dict) or "pid" not in entry:
                return None
            vram, gtt = int(usage.get("vram_mem") or 0), int(usage.get("gtt_mem") or 0)
            old = per_pid.get(int(entry["pid"]), (0, 0))
            per_pid[int(entry["pid"])] = (old[0] + vram, old[1] + gtt)
        return processes_from(per_pid)

    def _amdsmi_temperature(self, handle: object) -> int | None:
        smi = self._amdsmi
        assert smi is not None
        value = self._call(
            lambda: smi.amdsmi_get_temp_metric(
                handle, smi.AmdSmiTemperatureType.EDGE, smi.AmdSmiTemperatureMetric.CURRENT
            ),
            None,
        )
        return int(value) if isinstance(value, int | float) else None

    # -- sysfs ----------------------------------------------------------------------------------
    def _read_sysfs(self) -> GpuReading:
        cards = amd_cards(self._drm_root)
        if not cards:
            return GpuReading(
                source="sysfs",
                error=f"No AMD GPU with the amdgpu driver under {self._drm_root}.",
            )
        scan = self._index.scan()
        self.denied_pids = scan.denied_pids
        # The largest card first: vramtop watches the first device, and an APU's small
        # carve-out beside a discrete card is not where the server runs.
        cards.sort(key=lambda card: -(_read_int(card / "mem_info_vram_total") or 0))
        devices = [
            device
            for index, card in enumerate(cards)
            if (device := sysfs_device(index, card, scan)) is not None
        ]
        if not devices:
            return GpuReading(source="sysfs", error="The AMD GPU's memory files cannot be read.")
        return GpuReading(devices=tuple(devices), source="sysfs")

    def _call(self, fn: Callable[[], T], default: T) -> T:
        try:
            return fn()
        except Exception as exc:
            log.debug("amdsmi call failed: %s", exc)
            return default
