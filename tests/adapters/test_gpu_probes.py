"""The GPU probes on built inputs: a fake pynvml answering NOT_SUPPORTED for memory (as NVML
does on the DGX Spark's GB10), a fake /proc/meminfo, a fake sysfs + /proc fdinfo tree for a
Radeon R9700 whose server spilled into GTT, and amdsmi absent or faked present."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from vramtop.core.model import GIB, MIB, MemoryKind
from vramtop.sources.amd import AmdProbe
from vramtop.sources.amd_fdinfo import parse_fdinfo, scan_fdinfo
from vramtop.sources.host import read_meminfo
from vramtop.sources.nvml import NvmlProbe, UnifiedMemoryProbe, known_integrated
from vramtop.sources.probes import DeferredProbe, choose_probe

# A DGX Spark's /proc/meminfo (shape as the kernel prints it; 119.7 GiB of LPDDR5x).
SPARK_MEMINFO = """\
MemTotal:       125487628 kB
MemFree:         3187212 kB
MemAvailable:   41943040 kB
Buffers:          123456 kB
Cached:         38000000 kB
SwapCached:            0 kB
"""


class NVMLError(Exception):
    """As pynvml raises it: the return code in `.value`."""

    def __init__(self, value: int) -> None:
        super().__init__({3: "Not Supported", 9: "Driver Not Loaded"}.get(value, "Unknown"))
        self.value = value


class FakeNvml:
    """pynvml for one device whose memory query answers NOT_SUPPORTED (or works)."""

    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_ERROR_NOT_SUPPORTED = 3

    def __init__(self, name: str, *, memory_error: int | None = 3, count: int = 1) -> None:
        self.name = name
        self.memory_error = memory_error
        self.count = count
        self.inits = 0
        self.shutdowns = 0
        self.compute = [SimpleNamespace(pid=os.getpid(), usedGpuMemory=70 * GIB)]

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"h{i}"

    def nvmlDeviceGetName(self, h: str) -> str:
        return self.name

    def nvmlDeviceGetMemoryInfo(self, h: str) -> Any:
        if self.memory_error is not None:
            raise NVMLError(self.memory_error)
        return SimpleNamespace(total=32 * GIB, used=20 * GIB, free=12 * GIB)

    def nvmlDeviceGetTemperature(self, h: str, sensor: int) -> int:
        return 52

    def nvmlDeviceGetClockInfo(self, h: str, clock: int) -> int:
        raise NVMLError(3)

    def nvmlDeviceGetComputeRunningProcesses(self, h: str) -> list[Any]:
        return self.compute

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: str) -> list[Any]:
        raise NVMLError(3)


@pytest.fixture
def meminfo(tmp_path: Path) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(SPARK_MEMINFO)
    return path


def test_meminfo_gives_the_pool_and_what_the_kernel_can_hand_out(meminfo: Path) -> None:
    assert read_meminfo(meminfo) == (125487628 * 1024, 41943040 * 1024)
    (meminfo.parent / "bad").write_text("MemTotal: 12 kB\n")
    assert read_meminfo(meminfo.parent / "bad") is None  # no MemAvailable: unknown, not 0
    assert read_meminfo(meminfo.parent / "missing") is None


def test_gb10_not_supported_is_read_as_unified_memory_from_meminfo(meminfo: Path) -> None:
    fake = FakeNvml("NVIDIA GB10")
    reading = NvmlProbe(fake, wsl=False, meminfo=meminfo).read()  # type: ignore[arg-type]
    assert reading.available, reading.error
    device = reading.devices[0]
    assert device.memory_kind is MemoryKind.UNIFIED
    total, available = 125487628 * 1024, 41943040 * 1024
    assert (device.total_bytes, device.free_bytes) == (total, available)
    # The page cache (Cached) is not counted as used: MemAvailable is free.
    assert device.used_bytes == total - available
    # Per-process numbers still work on the Spark.
    assert device.processes is not None and device.processes[0].used_bytes == 70 * GIB


def test_not_supported_on_a_discrete_card_is_not_taken_for_unified(meminfo: Path) -> None:
    fake = FakeNvml("NVIDIA GeForce RTX 5090")
    reading = NvmlProbe(fake, wsl=False, meminfo=meminfo).read()  # type: ignore[arg-type]
    assert not reading.available and not reading.devices
    assert reading.error is not None
    assert "not a known integrated device" in reading.error
    assert "RTX 5090" in reading.error


def test_the_name_alone_does_not_make_unified_memory(meminfo: Path) -> None:
    # A GB10 whose memory query works (a future driver) keeps NVML's own numbers.
    fake = FakeNvml("NVIDIA GB10", memory_error=None)
    device = NvmlProbe(fake, wsl=False, meminfo=meminfo).read().devices[0]  # type: ignore[arg-type]
    assert device.memory_kind is MemoryKind.DEDICATED
    assert device.total_bytes == 32 * GIB


def test_another_error_on_an_integrated_device_is_not_unified(meminfo: Path) -> None:
    fake = FakeNvml("NVIDIA GB10", memory_error=9)  # driver not loaded: a lost GPU
    reading = NvmlProbe(fake, wsl=False, meminfo=meminfo).read()  # type: ignore[arg-type]
    assert not reading.available
    assert reading.error is not None and "Driver Not Loaded" in reading.error


def test_the_dedicated_only_probe_never_reads_unified(meminfo: Path) -> None:
    fake = FakeNvml("NVIDIA GB10")
    probe = NvmlProbe(fake, wsl=False, unified=False, meminfo=meminfo)  # type: ignore[arg-type]
    assert not probe.read().available


def test_the_unified_probe_takes_not_supported_as_enough(meminfo: Path) -> None:
    # The user set gpu_probe = "nvml-unified": an integrated part not on the list still works.
    fake = FakeNvml("NVIDIA DGX Station GB300 Desktop")
    probe = UnifiedMemoryProbe(fake, wsl=False, meminfo=meminfo)  # type: ignore[arg-type]
    device = probe.read().devices[0]
    assert device.memory_kind is MemoryKind.UNIFIED


def test_unified_without_meminfo_says_why(tmp_path: Path) -> None:
    fake = FakeNvml("NVIDIA GB10")
    reading = NvmlProbe(fake, wsl=False, meminfo=tmp_path / "none").read()  # type: ignore[arg-type]
    assert not reading.available and reading.error is not None and "cannot be read" in reading.error


@pytest.mark.parametrize(
    ("name", "integrated"),
    [
        ("NVIDIA GB10", True),
        ("NVIDIA-GB10", True),
        ("NVIDIA Jetson AGX Orin", True),
        ("NVIDIA GeForce RTX 5090", False),
        ("NVIDIA GB100", False),  # a substring is not the part
        ("NVIDIA H100 80GB HBM3", False),
    ],
)
def test_known_integrated_names(name: str, integrated: bool) -> None:
    assert known_integrated(name) is integrated


# --- AMD ---------------------------------------------------------------------------------------
PDEV = "0000:03:00.0"
R9700_VRAM = 32_624 * MIB


def fdinfo(client_id: int, vram_kib: int, gtt_kib: int, pdev: str = PDEV) -> str:
    return (
        "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1044\n"
        "drm-driver:\tamdgpu\n"
        f"drm-pdev:\t{pdev}\n"
        f"drm-client-id:\t{client_id}\n"
        "drm-engine-gfx:\t123456 ns\n"
        f"drm-memory-vram:\t{vram_kib} KiB\n"
        f"drm-memory-gtt:\t{gtt_kib} KiB\n"
        "drm-memory-cpu:\t0 KiB\n"
    )


def build_r9700(
    root: Path, *, server_pid: int, desktop_pid: int, other_pid: int
) -> tuple[Path, Path]:
    """/sys/class/drm and /proc for an R9700 whose vLLM holds 27 GiB of VRAM and spilled
    3 GiB into GTT, beside a compositor and an unreadable process of another user."""
    drm = root / "sys" / "class" / "drm"
    pci = root / "sys" / "devices" / "pci0000:00" / PDEV
    pci.mkdir(parents=True)
    files = {
        "vendor": "0x1002\n",
        "device": "0x7551\n",
        "uevent": f"DRIVER=amdgpu\nPCI_CLASS=30000\nPCI_SLOT_NAME={PDEV}\n",
        "mem_info_vram_total": f"{R9700_VRAM}\n",
        "mem_info_vram_used": f"{31 * GIB}\n",
        "mem_info_gtt_total": f"{62 * GIB}\n",
        "mem_info_gtt_used": f"{4 * GIB}\n",
        "pp_dpm_sclk": "0: 500Mhz\n1: 2350Mhz *\n2: 2920Mhz\n",
    }
    for name, text in files.items():
        (pci / name).write_text(text)
    (pci / "hwmon" / "hwmon3").mkdir(parents=True)
    (pci / "hwmon" / "hwmon3" / "temp1_input").write_text("64000\n")
    for card in ("card1",):
        (drm / card).mkdir(parents=True)
        (drm / card / "device").symlink_to(pci)
    (drm / "card1-DP-1").mkdir()  # a connector, not a card
    proc = root / "proc"
    fds = {
        # vLLM: two fds on one client (dup) plus a second client: counted once each.
        server_pid: {
            "5": ("/dev/dri/renderD128", fdinfo(11, 20 * 1024**2, 2 * 1024**2)),
            "6": ("/dev/dri/renderD128", fdinfo(11, 20 * 1024**2, 2 * 1024**2)),
            "7": ("/dev/dri/renderD128", fdinfo(12, 7 * 1024**2, 1 * 1024**2)),
            "8": ("/home/user/model.safetensors", "pos:\t0\n"),
        },
        desktop_pid: {"9": ("/dev/dri/card1", fdinfo(3, 3 * 1024**2, 512 * 1024))},
    }
    for pid, entries in fds.items():
        (proc / str(pid) / "fd").mkdir(parents=True)
        (proc / str(pid) / "fdinfo").mkdir()
        for fd, (target, text) in entries.items():
            (proc / str(pid) / "fd" / fd).symlink_to(target)
            (proc / str(pid) / "fdinfo" / fd).write_text(text)
    other = proc / str(other_pid) / "fd"
    other.mkdir(parents=True)
    other.chmod(0)  # another user's process: its fds are not ours to read
    (proc / "self").mkdir()
    return drm, proc


@pytest.fixture
def r9700(tmp_path: Path) -> tuple[Path, Path]:
    drm, proc = build_r9700(tmp_path, server_pid=4242, desktop_pid=1500, other_pid=900)
    yield drm, proc
    (proc / "900" / "fd").chmod(0o700)


def test_fdinfo_lines_are_read_as_nvtop_reads_them() -> None:
    client = parse_fdinfo(fdinfo(11, 2048, 1024))
    assert client is not None
    assert (client.pdev, client.client_id) == (PDEV, "11")
    assert (client.vram_bytes, client.gtt_bytes) == (2 * MIB, 1 * MIB)
    assert parse_fdinfo("drm-driver:\ti915\ndrm-client-id:\t4\n") is None
    newer = "drm-driver: amdgpu\ndrm-client-id: 5\ndrm-resident-vram: 3 MiB\ndrm-total-gtt: 8\n"
    parsed = parse_fdinfo(newer)
    assert parsed is not None and (parsed.vram_bytes, parsed.gtt_bytes) == (3 * MIB, 8)


def test_fdinfo_scan_counts_each_client_once_and_skips_what_it_cannot_read(
    r9700: tuple[Path, Path],
) -> None:
    _, proc = r9700
    scan = scan_fdinfo(proc)
    per_pid = scan.by_pdev[PDEV]
    assert per_pid[4242] == (27 * GIB, 3 * GIB)  # clients 11 and 12, the dup not twice
    assert per_pid[1500] == (3 * GIB, 512 * MIB)
    if os.geteuid() != 0:  # root reads through the permission bits
        assert scan.denied_pids == 1


def test_r9700_from_sysfs_and_fdinfo_when_amdsmi_is_absent(r9700: tuple[Path, Path]) -> None:
    drm, proc = r9700
    probe = AmdProbe(drm_root=drm, proc_root=proc)
    # amdsmi is not installed here: the probe says so and reads sysfs.
    reading = probe.read()
    assert reading.available, reading.error
    assert reading.source == "sysfs"
    assert probe.amdsmi_error is not None and "amdsmi" in probe.amdsmi_error
    device = reading.devices[0]
    assert device.memory_kind is MemoryKind.DEDICATED
    assert (device.total_bytes, device.used_bytes) == (R9700_VRAM, 31 * GIB)
    assert (device.gtt_total_bytes, device.gtt_used_bytes) == (62 * GIB, 4 * GIB)
    assert device.temperature_c == 64 and device.sm_clock_mhz == 2350
    assert device.processes is not None
    server = next(p for p in device.processes if p.pid == 4242)
    assert (server.used_bytes, server.gtt_bytes) == (27 * GIB, 3 * GIB)


class FakeAmdSmi:
    """amdsmi's Python API for one R9700 (functions and enums as ROCm names them)."""

    AmdSmiMemoryType = SimpleNamespace(VRAM=0, VIS_VRAM=1, GTT=2)
    AmdSmiTemperatureType = SimpleNamespace(EDGE=0)
    AmdSmiTemperatureMetric = SimpleNamespace(CURRENT=0)

    def __init__(self, *, init_fails: bool = False, process_dicts: bool = True) -> None:
        self.init_fails = init_fails
        self.process_dicts = process_dicts
        self.shut = 0

    def amdsmi_init(self) -> None:
        if self.init_fails:
            raise RuntimeError("AMDSMI_STATUS_DRIVER_NOT_LOADED")

    def amdsmi_shut_down(self) -> None:
        self.shut += 1

    def amdsmi_get_processor_handles(self) -> list[str]:
        return ["gpu0"]

    def amdsmi_get_gpu_memory_total(self, h: str, kind: int) -> int:
        return {0: R9700_VRAM, 2: 62 * GIB}[kind]

    def amdsmi_get_gpu_memory_usage(self, h: str, kind: int) -> int:
        return {0: 30 * GIB, 2: 5 * GIB}[kind]

    def amdsmi_get_gpu_asic_info(self, h: str) -> dict[str, Any]:
        return {"market_name": "AMD Radeon AI PRO R9700", "vendor_id": "0x1002"}

    def amdsmi_get_gpu_device_bdf(self, h: str) -> str:
        return PDEV

    def amdsmi_get_temp_metric(self, h: str, sensor: int, metric: int) -> int:
        return 70

    def amdsmi_get_gpu_process_list(self, h: str) -> list[Any]:
        if not self.process_dicts:
            return ["handle-1"]  # older releases: handles, not numbers
        return [
            {
                "name": "python3",
                "pid": 4242,
                "mem": 29 * GIB,
                "memory_usage": {"gtt_mem": 4 * GIB, "cpu_mem": 0, "vram_mem": 25 * GIB},
            }
        ]


def test_r9700_through_amdsmi_when_it_works(r9700: tuple[Path, Path]) -> None:
    drm, proc = r9700
    smi = FakeAmdSmi()
    probe = AmdProbe(smi, drm_root=drm, proc_root=proc)
    reading = probe.read()
    assert reading.source == "amdsmi"
    device = reading.devices[0]
    assert device.name == "AMD Radeon AI PRO R9700"
    assert (device.used_bytes, device.gtt_used_bytes, device.temperature_c) == (
        30 * GIB,
        5 * GIB,
        70,
    )
    assert device.processes is not None
    assert (device.processes[0].used_bytes, device.processes[0].gtt_bytes) == (25 * GIB, 4 * GIB)
    probe.close()
    assert smi.shut == 1


def test_amdsmi_without_process_memory_falls_back_to_fdinfo(r9700: tuple[Path, Path]) -> None:
    drm, proc = r9700
    reading = AmdProbe(FakeAmdSmi(process_dicts=False), drm_root=drm, proc_root=proc).read()
    assert reading.source == "amdsmi"
    processes = reading.devices[0].processes
    assert processes is not None
    assert {p.pid: p.gtt_bytes for p in processes}[4242] == 3 * GIB


def test_amdsmi_that_does_not_initialise_gives_way_to_sysfs(r9700: tuple[Path, Path]) -> None:
    drm, proc = r9700
    probe = AmdProbe(FakeAmdSmi(init_fails=True), drm_root=drm, proc_root=proc)
    reading = probe.read()
    assert reading.source == "sysfs" and reading.available
    assert probe.amdsmi_error is not None and "DRIVER_NOT_LOADED" in probe.amdsmi_error


def test_no_amd_card_is_a_reading_with_a_reason(tmp_path: Path) -> None:
    reading = AmdProbe(use_amdsmi=False, drm_root=tmp_path, proc_root=tmp_path).read()
    assert not reading.available and reading.error is not None and "No AMD GPU" in reading.error


# --- the automatic choice ------------------------------------------------------------------
def test_auto_picks_nvml_when_nvidia_answers(r9700: tuple[Path, Path], meminfo: Path) -> None:
    drm, proc = r9700
    fake = FakeNvml("NVIDIA GB10")
    probe = choose_probe("auto", nvml=fake, drm_root=drm, proc_root=proc, meminfo=meminfo)
    assert isinstance(probe, NvmlProbe)
    assert fake.inits == fake.shutdowns == 1  # the look leaves NVML as it found it
    probe._wsl = False
    assert probe.read().devices[0].memory_kind is MemoryKind.UNIFIED


def test_auto_picks_amd_without_nvidia(r9700: tuple[Path, Path]) -> None:
    drm, proc = r9700
    probe = choose_probe("auto", nvml=FakeNvml("x", count=0), drm_root=drm, proc_root=proc)
    assert isinstance(probe, AmdProbe)


def test_auto_falls_back_to_nvml_whose_reading_says_why(tmp_path: Path) -> None:
    probe = choose_probe("auto", nvml=FakeNvml("x", count=0), drm_root=tmp_path)
    assert isinstance(probe, NvmlProbe)


def test_the_console_s_probe_looks_at_the_machine_at_its_first_read(
    r9700: tuple[Path, Path],
) -> None:
    drm, proc = r9700
    fake = FakeNvml("x", count=0)
    probe = DeferredProbe("auto", nvml=fake, drm_root=drm, proc_root=proc)
    assert fake.inits == 0 and probe.name == "auto"  # made before the first frame: no look
    assert probe.read().available and probe.name == AmdProbe.name
    assert isinstance(probe.chosen(), AmdProbe) and fake.inits == 1  # looked once
    probe.read()
    assert fake.inits == 1
    probe.close()


def test_the_setting_overrides_the_choice(r9700: tuple[Path, Path], meminfo: Path) -> None:
    drm, _proc = r9700
    fake = FakeNvml("NVIDIA GB10")
    assert isinstance(choose_probe("amd-sysfs", nvml=fake, drm_root=drm), AmdProbe)
    assert isinstance(choose_probe("nvml-unified", nvml=fake), UnifiedMemoryProbe)
    dedicated = choose_probe("nvml", nvml=fake, meminfo=meminfo)
    dedicated._wsl = False  # type: ignore[union-attr]
    assert not dedicated.read().available  # "nvml" never reads unified
    with pytest.raises(ValueError, match="unknown GPU probe"):
        choose_probe("cuda")


def test_the_fd_index_finds_a_new_process_at_once_and_new_fds_on_refresh(
    r9700: tuple[Path, Path],
) -> None:
    from vramtop.sources.amd_fdinfo import FdinfoIndex

    _, proc = r9700
    now = [0.0]
    index = FdinfoIndex(proc, refresh_s=5.0, clock=lambda: now[0])
    assert index.scan().by_pdev[PDEV][4242] == (27 * GIB, 3 * GIB)
    # A restarted server: a new pid, found on the next tick.
    new = proc / "5151"
    (new / "fd").mkdir(parents=True)
    (new / "fdinfo").mkdir()
    (new / "fd" / "4").symlink_to("/dev/dri/renderD128")
    (new / "fdinfo" / "4").write_text(fdinfo(40, 1024**2, 0))
    now[0] = 1.0
    assert index.scan().by_pdev[PDEV][5151] == (GIB, 0)
    # A known process opening the card again: seen at the next full search, not before.
    (proc / "1500" / "fd" / "10").symlink_to("/dev/dri/renderD128")
    (proc / "1500" / "fdinfo" / "10").write_text(fdinfo(41, 1024**2, 0))
    now[0] = 2.0
    assert index.scan().by_pdev[PDEV][1500] == (3 * GIB, 512 * MIB)
    now[0] = 6.0
    assert index.scan().by_pdev[PDEV][1500] == (4 * GIB, 512 * MIB)
    # The memory itself is read fresh every tick.
    (proc / "4242" / "fdinfo" / "7").write_text(fdinfo(12, 7 * 1024**2, 2 * 1024**2))
    now[0] = 7.0
    assert index.scan().by_pdev[PDEV][4242] == (27 * GIB, 4 * GIB)
