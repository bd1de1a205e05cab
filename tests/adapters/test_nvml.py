"""The NVML probe against a fake `pynvml` module that replays what the driver returns."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from vramtop.core.model import GIB
from vramtop.sources.nvml import INIT_RETRY_READS, NvmlProbe

# /dev/kmsg records as WSL2's kernel writes them (microsoft/WSL #41176, #11939).
RESIDENCY_RECORD = (
    "3,2207,91234567,-;misc dxg: dxgk: dxgkio_make_resident: Ioctl failed: -12\n"
    " SUBSYSTEM=misc\n DEVICE=c10:125\n"
)
ADAPTER_INFO_RECORD = (
    "3,2208,91234570,-;misc dxg: dxgk: dxgkio_query_adapter_info: Ioctl failed: -22\n"
)


class NVMLError(Exception):
    """As pynvml raises it: the return code in `.value` (3: NOT_SUPPORTED)."""

    def __init__(self, message: str, value: int = 999) -> None:
        super().__init__(message)
        self.value = value


NOT_SUPPORTED = 3


class FakeNvml:
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_ERROR_NOT_SUPPORTED = NOT_SUPPORTED
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    # What the driver answers (KiB/s per counter; percent), as pynvml returns it.
    pcie_kib_per_s: ClassVar[dict[int, int]] = {0: 310_000, 1: 11_800_000}
    utilization = SimpleNamespace(gpu=97, memory=41)

    def __init__(self, *, compute: list[Any] | None, graphics: list[Any] | None) -> None:
        self.compute = compute
        self.graphics = graphics
        self.fail_on: str | None = None
        self.not_supported: set[str] = set()  # calls that answer NOT_SUPPORTED
        self.calls: list[str] = []

    def _maybe_fail(self, name: str) -> None:
        self.calls.append(name)
        if self.fail_on == name:
            raise NVMLError(f"{name} failed")
        if name in self.not_supported:
            raise NVMLError("Not Supported", NOT_SUPPORTED)

    def nvmlInit(self) -> None:
        self._maybe_fail("nvmlInit")

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        self._maybe_fail("nvmlDeviceGetCount")
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        self._maybe_fail("nvmlDeviceGetHandleByIndex")
        return f"h{i}"

    def nvmlDeviceGetMemoryInfo(self, h: str) -> Any:
        self._maybe_fail("nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(total=32 * GIB, used=30 * GIB, free=2 * GIB)

    def nvmlDeviceGetName(self, h: str) -> str:
        self._maybe_fail("nvmlDeviceGetName")
        return "NVIDIA GeForce RTX 5090"

    def nvmlDeviceGetTemperature(self, h: str, sensor: int) -> int:
        self._maybe_fail("nvmlDeviceGetTemperature")
        return 61

    def nvmlDeviceGetClockInfo(self, h: str, clock: int) -> int:
        self._maybe_fail("nvmlDeviceGetClockInfo")
        return 2610

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: str) -> int:
        self._maybe_fail("nvmlDeviceGetCurrentClocksEventReasons")
        return 0x40 | 0x4

    def nvmlDeviceGetComputeRunningProcesses(self, h: str) -> list[Any] | None:
        self._maybe_fail("nvmlDeviceGetComputeRunningProcesses")
        return self.compute

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: str) -> list[Any] | None:
        self._maybe_fail("nvmlDeviceGetGraphicsRunningProcesses")
        return self.graphics

    def nvmlDeviceGetPcieThroughput(self, h: str, counter: int) -> int:
        self._maybe_fail("nvmlDeviceGetPcieThroughput")
        return self.pcie_kib_per_s[counter]

    def nvmlDeviceGetUtilizationRates(self, h: str) -> Any:
        self._maybe_fail("nvmlDeviceGetUtilizationRates")
        return self.utilization


def proc(pid: int, used: int | None) -> Any:
    return SimpleNamespace(pid=pid, usedGpuMemory=used)


def test_linux_reading_merges_compute_and_graphics_lists() -> None:
    me = os.getpid()
    fake = FakeNvml(compute=[proc(me, 28 * GIB)], graphics=[proc(me, 1 * GIB), proc(4, 2 * GIB)])
    reading = NvmlProbe(nvml=fake, wsl=False).read()  # type: ignore[arg-type]
    assert reading.available
    device = reading.devices[0]
    assert device.name == "NVIDIA GeForce RTX 5090"
    assert (device.total_bytes, device.used_bytes, device.free_bytes) == (
        32 * GIB,
        30 * GIB,
        2 * GIB,
    )
    assert device.temperature_c == 61 and device.sm_clock_mhz == 2610
    assert device.throttle == ("sw_power_cap", "hw_thermal")
    assert device.processes is not None
    by_pid = {p.pid: p for p in device.processes}
    assert by_pid[me].used_bytes == 28 * GIB  # the larger of the two lists for one pid
    assert by_pid[me].name  # named through psutil
    assert by_pid[4].used_bytes == 2 * GIB


def test_wsl_reading_says_per_process_memory_is_not_available() -> None:
    fake = FakeNvml(compute=[proc(77, None)], graphics=[])
    device = NvmlProbe(nvml=fake, wsl=True, kmsg=None).read().devices[0]  # type: ignore[arg-type]
    assert device.processes is None
    assert device.used_bytes == 30 * GIB


def test_a_vanished_process_keeps_its_memory_with_a_placeholder_name() -> None:
    fake = FakeNvml(compute=[proc(2**22 + 12345, GIB)], graphics=None)
    device = NvmlProbe(nvml=fake, wsl=False).read().devices[0]  # type: ignore[arg-type]
    assert device.processes is not None
    assert device.processes[0].name.startswith("pid ")


def test_missing_driver_is_a_state_not_a_crash() -> None:
    fake = FakeNvml(compute=[], graphics=[])
    fake.fail_on = "nvmlInit"
    reading = NvmlProbe(nvml=fake, wsl=False).read()  # type: ignore[arg-type]
    assert not reading.available
    assert reading.error is not None and "driver" in reading.error


@pytest.mark.parametrize(
    "failing",
    [
        "nvmlDeviceGetCount",
        "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetName",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetGraphicsRunningProcesses",
        "nvmlDeviceGetPcieThroughput",
        "nvmlDeviceGetUtilizationRates",
    ],
)
def test_each_nvml_call_failing_in_turn_never_raises(failing: str) -> None:
    fake = FakeNvml(compute=[proc(5, GIB)], graphics=[])
    fake.fail_on = failing
    reading = NvmlProbe(nvml=fake, wsl=False).read()  # type: ignore[arg-type]
    essential = {"nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetMemoryInfo"}
    if failing in essential:
        assert not reading.available and reading.error
    else:
        assert reading.available
        assert reading.devices[0].used_bytes == 30 * GIB


def test_a_failed_read_shuts_nvml_down_before_the_next_init() -> None:
    class Counting(FakeNvml):
        def nvmlShutdown(self) -> None:
            self.calls.append("nvmlShutdown")

        def nvmlDeviceGetMemoryInfo(self, h: str) -> Any:
            self.calls.append("nvmlDeviceGetMemoryInfo")
            return SimpleNamespace(total=None, used=0, free=0)  # a driver answering nonsense

    nvml = Counting(compute=[], graphics=[])
    probe = NvmlProbe(nvml=nvml, wsl=False)  # type: ignore[arg-type]
    assert probe.read().error is not None
    assert probe.read().error is not None
    # Each failed read shuts down the init it made (NVML counts inits).
    assert nvml.calls.count("nvmlInit") == 2
    assert nvml.calls.count("nvmlShutdown") == 2


def test_a_missing_driver_is_looked_for_again_every_few_reads_not_every_read() -> None:
    fake = FakeNvml(compute=[], graphics=[])
    fake.fail_on = "nvmlInit"
    probe = NvmlProbe(nvml=fake, wsl=False)  # type: ignore[arg-type]
    readings = [probe.read() for _ in range(INIT_RETRY_READS)]
    # Every read says why there is no GPU; the library was asked once.
    assert all(r.error is not None and "driver" in r.error for r in readings)
    assert fake.calls.count("nvmlInit") == 1
    fake.fail_on = None  # the driver is there now: the next try finds it
    reading = probe.read()
    assert fake.calls.count("nvmlInit") == 2
    assert reading.available


def test_the_card_says_its_pcie_traffic_and_utilisation() -> None:
    device = NvmlProbe(nvml=FakeNvml(compute=[], graphics=[]), wsl=False).read().devices[0]  # type: ignore[arg-type]
    # NVML's KiB/s as bytes/s, its percent as fractions (the session format's rule).
    assert device.pcie_rx_bytes_per_s == 11_800_000 * 1024
    assert device.pcie_tx_bytes_per_s == 310_000 * 1024
    assert device.gpu_util == 0.97 and device.memory_util == 0.41


def test_counters_the_driver_does_not_support_are_unknown_and_not_asked_again() -> None:
    fake = FakeNvml(compute=[], graphics=[])
    fake.not_supported = {"nvmlDeviceGetPcieThroughput", "nvmlDeviceGetUtilizationRates"}
    probe = NvmlProbe(nvml=fake, wsl=True, kmsg=None)  # type: ignore[arg-type]
    first, second = probe.read(), probe.read()
    for reading in (first, second):
        device = reading.devices[0]
        assert reading.available and device.used_bytes == 30 * GIB
        assert device.pcie_rx_bytes_per_s is None and device.pcie_tx_bytes_per_s is None
        assert device.gpu_util is None and device.memory_util is None
    # Asked on the first read only (the PCIe call answered for RX; TX is the same call).
    assert fake.calls.count("nvmlDeviceGetPcieThroughput") == 1
    assert fake.calls.count("nvmlDeviceGetUtilizationRates") == 1


def test_a_counter_that_failed_otherwise_is_asked_again_next_read() -> None:
    fake = FakeNvml(compute=[], graphics=[])
    fake.fail_on = "nvmlDeviceGetUtilizationRates"
    probe = NvmlProbe(nvml=fake, wsl=False)  # type: ignore[arg-type]
    assert probe.read().devices[0].gpu_util is None
    fake.fail_on = None
    assert probe.read().devices[0].gpu_util == 0.97


def test_an_old_library_without_the_calls_reads_the_rest() -> None:
    class Old(FakeNvml):
        nvmlDeviceGetPcieThroughput = None  # type: ignore[assignment]

    device = NvmlProbe(nvml=Old(compute=[], graphics=[]), wsl=False).read().devices[0]  # type: ignore[arg-type]
    assert device.pcie_rx_bytes_per_s is None
    assert device.memory_util == 0.41


def test_wsl_readings_count_the_kernels_residency_failures(tmp_path: Path) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(RESIDENCY_RECORD * 5)  # logged before vramtop looked: not counted
    probe = NvmlProbe(nvml=FakeNvml(compute=[], graphics=[]), wsl=True, kmsg=kmsg)  # type: ignore[arg-type]
    assert probe.read().residency_failures == 0
    with kmsg.open("a") as log:
        log.write(RESIDENCY_RECORD * 3 + ADAPTER_INFO_RECORD)
    assert probe.read().residency_failures == 3
    assert probe.read().residency_failures == 0
    probe.close()


def test_linux_readings_and_an_unreadable_log_count_nothing(tmp_path: Path) -> None:
    linux = NvmlProbe(nvml=FakeNvml(compute=[], graphics=[]), wsl=False, kmsg=tmp_path / "k")  # type: ignore[arg-type]
    assert linux.read().residency_failures is None and linux.residency_problem is None
    wsl = NvmlProbe(nvml=FakeNvml(compute=[], graphics=[]), wsl=True, kmsg=tmp_path / "none")  # type: ignore[arg-type]
    reading = wsl.read()
    assert reading.available and reading.residency_failures is None
    assert wsl.residency_problem is not None and "does not exist" in wsl.residency_problem
