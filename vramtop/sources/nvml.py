"""The GPU probe over NVML (nvidia-ml-py, imported as `pynvml`).

One batched pass over every device per tick. Each call that fails gives a default instead of
raising (as nvitop's API does); a missing library or driver is a `GpuReading` with a reason.
Per-process memory merges the compute and graphics lists; where the driver has none (WSL2) the
processes are `None`, meaning "not available", never "no processes".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any, TypeVar

import psutil

from vramtop.core.model import GpuDevice, GpuReading, ProcessMemory
from vramtop.sources.host import is_wsl

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


def throttle_names(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, name in THROTTLE_BITS if mask & bit)


class NvmlProbe:
    """Reads every NVIDIA device once per `read()`. Thread-safe; never raises."""

    def __init__(self, nvml: ModuleType | None = None, wsl: bool | None = None) -> None:
        self._nvml = nvml
        self._initialised = False
        self._lock = threading.Lock()
        self._wsl = is_wsl() if wsl is None else wsl
        self._init_error: str | None = None

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

    def _ensure_init(self) -> str | None:
        if self._initialised:
            return None
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
        return None

    def _read(self) -> GpuReading:
        error = self._ensure_init()
        if error is not None:
            return GpuReading(source="nvml", error=error)
        nvml = self._nvml
        assert nvml is not None
        count = self._call(nvml.nvmlDeviceGetCount, 0)
        devices = []
        for index in range(count):
            handle = self._call(partial(nvml.nvmlDeviceGetHandleByIndex, index), None)
            if handle is None:
                continue
            device = self._device(index, handle)
            if device is not None:
                devices.append(device)
        if not devices:
            return GpuReading(source="nvml", error="NVML found no readable NVIDIA device.")
        return GpuReading(devices=tuple(devices), source="nvml")

    def _device(self, index: int, handle: Any) -> GpuDevice | None:
        nvml = self._nvml
        assert nvml is not None
        memory = self._call(lambda: nvml.nvmlDeviceGetMemoryInfo(handle), None)
        if memory is None:
            return None
        name = self._call(lambda: nvml.nvmlDeviceGetName(handle), f"GPU {index}")
        if isinstance(name, bytes):
            name = name.decode(errors="replace")
        temperature = self._call(
            lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU), None
        )
        clock = self._call(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM), None)
        reasons = self._throttle_mask(handle)
        return GpuDevice(
            index=index,
            name=str(name),
            total_bytes=int(memory.total),
            used_bytes=int(memory.used),
            free_bytes=int(memory.free),
            temperature_c=None if temperature is None else int(temperature),
            sm_clock_mhz=None if clock is None else int(clock),
            throttle=throttle_names(reasons) if reasons is not None else (),
            processes=self._processes(handle),
        )

    def _throttle_mask(self, handle: Any) -> int | None:
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

    def _processes(self, handle: Any) -> tuple[ProcessMemory, ...] | None:
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


def _process_name(pid: int) -> str:
    try:
        return psutil.Process(pid).name()
    except (psutil.Error, OSError):
        return f"pid {pid}"
