"""The GPU probe over NVML (nvidia-ml-py, imported as `pynvml`).

One batched pass over every device per tick. Each call that fails gives a default instead of
raising (as nvitop's API does); a missing library or driver is a `GpuReading` with a reason.
Per-process memory merges the compute and graphics lists; where the driver has none (WSL2) the
processes are `None`, meaning "not available", never "no processes".

Unified memory (DGX Spark's GB10): NVML answers NOT_SUPPORTED for the device's memory while
per-process numbers still work, and the memory is the system's. The device is read as unified
only on both signs together — NOT_SUPPORTED *and* a known integrated device — so a lost GPU or a
driver mismatch (which can also answer NOT_SUPPORTED) is never taken for unified memory. NVML
has no "integrated" attribute (its ATS addressing mode is also reported by Grace Hopper, which
has memory of its own), so the sign is the short list of integrated NVIDIA parts below.

What the card says it is doing, per device and tick: PCIe RX/TX throughput
(`nvmlDeviceGetPcieThroughput`, KiB/s over a 20 ms window: the two calls take ~40 ms, in the
reader's thread) and GPU and memory-controller utilisation (`nvmlDeviceGetUtilizationRates`).
WSL2's driver answers them too where it can; a call that answers NOT_SUPPORTED is not asked
again on that device until NVML is started afresh. On WSL2 the reading also counts the
kernel's residency-failure lines (`dxg_kmsg.py`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from vramtop.core.model import GpuDevice, GpuReading, MemoryKind, ProcessMemory
from vramtop.sources.dxg_kmsg import KMSG, ResidencyWatch
from vramtop.sources.host import MEMINFO, is_wsl, read_meminfo
from vramtop.sources.host import process_name as _process_name

log = logging.getLogger(__name__)

T = TypeVar("T")

# NVML clock-event (throttle) reason bits, named as the session format names them.
THROTTLE_BITS: tuple[tuple[int, str], ...] = (
    (0x0000000000000004, "sw_power_cap"),
    (0x0000000000000008, "hw_slowdown"),
    (0x0000000000000020, "sw_thermal"),
    (0x0000000000000040, "hw_thermal"),
    (0x0000000000000080, "hw_power_brake"),
)


# NVIDIA parts whose GPU shares the system's memory (matched as words of the device name).
INTEGRATED_NAMES: tuple[str, ...] = ("GB10", "Jetson", "Orin", "Thor")
NVML_ERROR_NOT_SUPPORTED = 3
# After NVML failed to load or initialise (no driver, no library), the reads in between answer
# with the same reason and only every this many reads is it tried again: a driver installed
# meanwhile is seen within seconds, and a machine without one does not search for the
# library every second.
INIT_RETRY_READS = 10
# nvmlDeviceGetPcieThroughput's counters (pynvml's NVML_PCIE_UTIL_TX_BYTES / _RX_BYTES) and
# its unit: KiB/s (nvidia-smi and nvitop multiply by 1024).
PCIE_UTIL_TX_BYTES = 0
PCIE_UTIL_RX_BYTES = 1
PCIE_KIB = 1024


def throttle_names(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, name in THROTTLE_BITS if mask & bit)


def known_integrated(name: str) -> bool:
    """True for a device name of a known integrated NVIDIA part ("NVIDIA GB10")."""
    words = name.replace("-", " ").split()
    return any(part in words for part in INTEGRATED_NAMES)


def is_not_supported(exc: BaseException, nvml: ModuleType | None = None) -> bool:
    """True for NVML's NOT_SUPPORTED error (pynvml raises NVMLError with `.value`)."""
    code = getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED)
    return getattr(exc, "value", None) == code


class _Unreadable(Exception):
    """A device whose memory cannot be read; the message says why."""


class NvmlProbe:
    """Reads every NVIDIA device once per `read()`. Thread-safe; never raises.

    `unified`: None recognises unified memory by both signs (NOT_SUPPORTED on a known
    integrated device); False never reads a device as unified; True (the unified-memory
    probe) takes NOT_SUPPORTED alone as the sign, because the user said so.

    `kmsg`: the kernel log that WSL2's residency failures are counted in (None: not
    read); only read on WSL2."""

    name = "nvml"

    def __init__(
        self,
        nvml: ModuleType | None = None,
        wsl: bool | None = None,
        *,
        unified: bool | None = None,
        meminfo: Path = MEMINFO,
        kmsg: Path | None = KMSG,
    ) -> None:
        self._nvml = nvml
        self._initialised = False
        self._lock = threading.Lock()
        self._wsl = is_wsl() if wsl is None else wsl
        self._init_error: str | None = None
        self._init_retry_in = 0  # reads until the next nvmlInit after one failed
        self._unified = unified
        self._meminfo = meminfo
        # (device index, NVML function) pairs that answered NOT_SUPPORTED: not asked again.
        self._unsupported: set[tuple[int, str]] = set()
        self._residency = ResidencyWatch(kmsg) if self._wsl and kmsg is not None else None

    def read(self) -> GpuReading:
        with self._lock:
            try:
                return self._read()
            except Exception as exc:  # a driver reset or a library bug: one bad tick, not a crash
                log.exception("NVML read failed")
                # Start afresh next tick; shut down first, as each nvmlInit is counted.
                if self._initialised and self._nvml is not None:
                    self._call(self._nvml.nvmlShutdown, None)
                self._initialised = False
                return GpuReading(source="nvml", error=f"NVML read failed: {exc}")

    def close(self) -> None:
        with self._lock:
            if self._initialised and self._nvml is not None:
                self._call(self._nvml.nvmlShutdown, None)
            self._initialised = False
            if self._residency is not None:
                self._residency.close()

    @property
    def residency_problem(self) -> str | None:
        """Why the kernel's residency failures are not counted (None: they are, or this
        is not WSL2)."""
        return self._residency.problem if self._residency is not None else None

    def _ensure_init(self) -> str | None:
        if self._initialised:
            return None
        if self._init_error is not None and self._init_retry_in > 0:
            # The library or the driver was not there a moment ago: loading it is tried again
            # only every INIT_RETRY_READS reads (each try searches the disk for the library).
            self._init_retry_in -= 1
            return self._init_error
        self._init_error = self._init()
        self._init_retry_in = INIT_RETRY_READS - 1
        return self._init_error

    def _init(self) -> str | None:
        if self._nvml is None:
            try:
                import pynvml  # type: ignore[import-untyped]
            except ImportError:
                return "NVML is not available: nvidia-ml-py is not installed."
            self._nvml = pynvml
        try:
            self._nvml.nvmlInit()
        except Exception as exc:
            return (
                f"NVML is not available ({exc}). Is the NVIDIA driver installed? "
                "Try vramtop --demo to see the console without a GPU."
            )
        self._initialised = True
        self._unsupported.clear()  # a new driver may answer what the old one did not
        return None

    def _read(self) -> GpuReading:
        error = self._ensure_init()
        if error is not None:
            return GpuReading(source="nvml", error=error)
        nvml = self._nvml
        assert nvml is not None
        count = self._call(nvml.nvmlDeviceGetCount, 0)
        devices = []
        reasons = []
        for index in range(count):
            handle = self._call(partial(nvml.nvmlDeviceGetHandleByIndex, index), None)
            if handle is None:
                continue
            try:
                devices.append(self._device(index, handle))
            except _Unreadable as exc:
                reasons.append(str(exc))
        if not devices:
            why = " ".join(reasons) or "NVML found no readable NVIDIA device."
            return GpuReading(source="nvml", error=why)
        residency = self._residency.read() if self._residency is not None else None
        return GpuReading(devices=tuple(devices), source="nvml", residency_failures=residency)

    def _memory(self, handle: object, name: str) -> tuple[int, int, int, MemoryKind]:
        """(total, used, free, kind) of one device; _Unreadable with the reason if none."""
        nvml = self._nvml
        assert nvml is not None
        try:
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        except Exception as exc:
            if not is_not_supported(exc, nvml):
                raise _Unreadable(f"{name}: NVML cannot read its memory ({exc}).") from exc
        else:
            # Nonsense numbers raise here, outside the call: the read starts NVML afresh.
            return int(memory.total), int(memory.used), int(memory.free), MemoryKind.DEDICATED
        integrated = known_integrated(name)
        if self._unified is False or (self._unified is None and not integrated):
            raise _Unreadable(
                f"{name}: NVML says reading its memory is not supported, and it is not a "
                "known integrated device, so it is not taken for unified memory (a lost GPU "
                "or a driver that does not match its library?). Check nvidia-smi; on a "
                'unified-memory machine set gpu_probe = "nvml-unified" in config.toml.'
            )
        pool = read_meminfo(self._meminfo)
        if pool is None:
            raise _Unreadable(
                f"{name} shares the system's memory (unified), but {self._meminfo} cannot be "
                "read for its size."
            )
        total, available = pool
        return total, max(0, total - available), available, MemoryKind.UNIFIED

    def _device(self, index: int, handle: object) -> GpuDevice:
        nvml = self._nvml
        assert nvml is not None
        name = self._call(lambda: nvml.nvmlDeviceGetName(handle), f"GPU {index}")
        if isinstance(name, bytes):
            name = name.decode(errors="replace")
        total, used, free, kind = self._memory(handle, str(name))
        temperature = self._call(
            lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU), None
        )
        clock = self._call(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM), None)
        reasons = self._throttle_mask(handle)
        rx = self._counter(index, "nvmlDeviceGetPcieThroughput", handle, _rx_counter(nvml))
        tx = self._counter(index, "nvmlDeviceGetPcieThroughput", handle, _tx_counter(nvml))
        rates = self._counter(index, "nvmlDeviceGetUtilizationRates", handle)
        return GpuDevice(
            index=index,
            name=str(name),
            total_bytes=total,
            used_bytes=used,
            free_bytes=free,
            temperature_c=None if temperature is None else int(temperature),
            sm_clock_mhz=None if clock is None else int(clock),
            throttle=throttle_names(reasons) if reasons is not None else (),
            processes=self._processes(handle),
            memory_kind=kind,
            pcie_rx_bytes_per_s=_kib_per_s(rx),
            pcie_tx_bytes_per_s=_kib_per_s(tx),
            gpu_util=_percent(getattr(rates, "gpu", None)),
            memory_util=_percent(getattr(rates, "memory", None)),
        )

    def _counter(self, index: int, name: str, handle: object, *args: int) -> object:
        """One optional NVML call's answer, or None: where it is missing from the library,
        fails, or answered NOT_SUPPORTED on this device before (then it is not asked)."""
        nvml = self._nvml
        getter = getattr(nvml, name, None)
        key = (index, name)
        if getter is None or key in self._unsupported:
            return None
        try:
            return getter(handle, *args)
        except Exception as exc:
            if is_not_supported(exc, nvml):
                self._unsupported.add(key)
            log.debug("NVML %s failed: %s", name, exc)
            return None

    def _throttle_mask(self, handle: object) -> int | None:
        nvml = self._nvml
        assert nvml is not None
        for name in (
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
        ):
            getter = getattr(nvml, name, None)
            if getter is not None:
                mask = self._call(partial(getter, handle), None)
                if mask is not None:
                    return int(mask)
        return None

    def _processes(self, handle: object) -> tuple[ProcessMemory, ...] | None:
        """Merge the compute and graphics lists; None where the driver gives no numbers."""
        nvml = self._nvml
        assert nvml is not None
        merged: dict[int, int] = {}
        any_list = False
        for name in (
            "nvmlDeviceGetComputeRunningProcesses",
            "nvmlDeviceGetGraphicsRunningProcesses",
        ):
            getter = getattr(nvml, name, None)
            entries = self._call(partial(getter, handle), None) if getter else None
            if entries is None:
                continue
            any_list = True
            for entry in entries:
                used = getattr(entry, "usedGpuMemory", None)
                if used is None:  # NVML_VALUE_NOT_AVAILABLE, as under WDDM
                    continue
                merged[int(entry.pid)] = max(merged.get(int(entry.pid), 0), int(used))
        if not any_list or (self._wsl and not merged):
            return None
        return tuple(
            ProcessMemory(pid=pid, name=_process_name(pid), used_bytes=used)
            for pid, used in sorted(merged.items(), key=lambda item: -item[1])
        )

    def _call(self, fn: Callable[[], T], default: T) -> T:
        try:
            return fn()
        except Exception as exc:
            log.debug("NVML call failed: %s", exc)
            return default


def _rx_counter(nvml: ModuleType) -> int:
    return int(getattr(nvml, "NVML_PCIE_UTIL_RX_BYTES", PCIE_UTIL_RX_BYTES))


def _tx_counter(nvml: ModuleType) -> int:
    return int(getattr(nvml, "NVML_PCIE_UTIL_TX_BYTES", PCIE_UTIL_TX_BYTES))


def _kib_per_s(value: object) -> int | None:
    """NVML's KiB/s as bytes/s; None for an answer that is not a count."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value * PCIE_KIB


def _percent(value: object) -> float | None:
    """NVML's percent (0..100) as a fraction; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        return None
    return value / 100


class UnifiedMemoryProbe(NvmlProbe):
    """NVIDIA with one memory pool shared with the CPU (DGX Spark): NVML for the device and
    its processes, /proc/meminfo for the pool (MemTotal; MemAvailable counts as free)."""

    name = "nvml-unified"

    def __init__(
        self, nvml: ModuleType | None = None, wsl: bool | None = None, meminfo: Path = MEMINFO
    ) -> None:
        super().__init__(nvml, wsl, unified=True, meminfo=meminfo)
