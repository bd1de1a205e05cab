"""`vramtop doctor`: what vramtop can see on this machine, and why not, one check at a time.

Each check reads one thing the console depends on and says what it found, or what failed and
the fix. The verdict (the exit code) is about the split the console can show:
  0  the split is shown: the driver lists per-process memory (or, on WSL2, Windows' counters
     name the WSL VM);
  3  the GPU is readable but vLLM's share can only be derived from its budget;
  4  the GPU cannot be read at all.
A server that does not answer is reported but does not change the verdict: the server may
simply not be running yet.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from vramtop.core.model import GIB, GpuReading, MemoryKind, ServerReading
from vramtop.core.shell_words import shell_word
from vramtop.core.slow_part import PLACE_FIX, place_words
from vramtop.outcomes import ExitCode
from vramtop.sources.dxg_kmsg import ALLOW_HINT

Status = Literal["ok", "warn", "fail", "skip"]

EXIT_SPLIT_SHOWN = ExitCode.OK
EXIT_SPLIT_DERIVED = ExitCode.DERIVED_ONLY
EXIT_NO_GPU = ExitCode.NO_GPU


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    name: str  # a stable id for scripts: gpu, per_process, unified_memory, …
    status: Status
    detail: str  # what was found, or what failed
    fix: str | None = None  # what to do about it (None when nothing needs doing)


@dataclass
class Facts:
    """What the checks need from the machine; the command gathers them, tests build them."""

    probe_name: str
    reading: GpuReading
    wsl: bool = False
    config_error: str | None = None
    powershell: str | None = None  # its path, on WSL2
    interop_problem: str | None = None
    windows_error: str | None = None  # the Windows counters' reading error, None when read
    windows_vm: str | None = None  # the WSL VM's name in Windows' counters
    amd_cards: int = 0
    amdsmi_error: str | None = None
    fdinfo_denied: int = 0
    profile: str | None = None
    profile_error: str | None = None
    launch_problem: str | None = None  # why the profile's launch command cannot run here
    # Where the profile's model is read from and the slow place it is on (a Windows drive, a
    # network file system); None: a local disk, or not known.
    model_place: tuple[str, str] | None = None
    url: str | None = None
    server: ServerReading | None = None
    log_path: Path | None = None
    private_paths: list[Path] = field(default_factory=list)
    # WSL2: why the kernel's log (its residency-failure lines) cannot be read; None: it can.
    kernel_log_problem: str | None = None


def _gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def gpu_checks(f: Facts) -> list[Check]:
    checks = []
    if f.config_error is not None:
        checks.append(
            Check(
                "config",
                "fail",
                f"config.toml cannot be used: {f.config_error}",
                "fix the file (the message names the line or field); the GPU is read with "
                'gpu_probe = "auto" meanwhile',
            )
        )
    r = f.reading
    if not r.available:
        fix = "install the NVIDIA driver and nvidia-ml-py (pip install nvidia-ml-py)"
        if r.source in ("amdsmi", "sysfs"):
            fix = "load the amdgpu driver (and ROCm for amdsmi); check /sys/class/drm/card*/device"
        elif r.error and "not a known integrated device" in r.error:
            fix = 'if this machine shares its memory with the GPU, set gpu_probe = "nvml-unified"'
        checks.append(Check("gpu", "fail", f"{f.probe_name}: {r.error}", fix))
        return checks
    d = r.devices[0]
    others = f" (+{len(r.devices) - 1} more)" if len(r.devices) > 1 else ""
    checks.append(
        Check(
            "gpu",
            "ok",
            f"{d.name}{others} through {r.source}: {_gib(d.used_bytes)} used of "
            f"{_gib(d.total_bytes)}",
        )
    )
    if d.processes is None:
        checks.append(
            Check(
                "per_process",
                "warn",
                "the driver gives no per-process memory here (WSL2): vLLM's share is derived "
                "from its budget unless Windows' counters are read",
                "on WSL2 keep powershell.exe reachable (see the windows checks)",
            )
        )
    else:
        gtt = " with GTT per process" if any(p.gtt_bytes is not None for p in d.processes) else ""
        checks.append(
            Check("per_process", "ok", f"{len(d.processes)} process(es) listed by the driver{gtt}")
        )
    if d.memory_kind is MemoryKind.UNIFIED:
        checks.append(
            Check(
                "unified_memory",
                "ok",
                "unified memory (shared with the system): the pool is MemTotal, free is "
                "MemAvailable from /proc/meminfo; the desktop's share is the system's other use",
            )
        )
    else:
        gtt = (
            f"; GTT (system memory the card maps) {_gib(d.gtt_used_bytes)} used"
            if d.gtt_used_bytes is not None
            else ""
        )
        checks.append(Check("unified_memory", "skip", f"dedicated VRAM{gtt}"))
    return checks


def card_checks(f: Facts) -> list[Check]:
    """What the card says it does (NVML's PCIe throughput and utilisation), and on WSL2
    whether the kernel's residency failures can be read."""
    checks = []
    d = f.reading.devices[0] if f.reading.available else None
    if d is None:
        checks.append(Check("card_counters", "skip", "no GPU reading"))
    else:
        known = [
            name
            for name, value in (
                ("PCIe throughput", d.pcie_rx_bytes_per_s),
                ("GPU utilisation", d.gpu_util),
                ("memory utilisation", d.memory_util),
            )
            if value is not None
        ]
        if known:
            checks.append(Check("card_counters", "ok", "the card gives " + ", ".join(known)))
        else:
            checks.append(
                Check(
                    "card_counters",
                    "skip",
                    f"{f.reading.source} gives no PCIe throughput or utilisation here: a spill "
                    "is told by the memory alone",
                )
            )
    if not f.wsl:
        checks.append(Check("kernel_log", "skip", "not WSL2: dxgkrnl's lines are WSL2's"))
    elif f.kernel_log_problem is not None:
        checks.append(
            Check(
                "kernel_log",
                "warn",
                f"{f.kernel_log_problem}: dxgkrnl's residency failures "
                "(dxgkio_make_resident: Ioctl failed: -12) are not counted",
                ALLOW_HINT,
            )
        )
    else:
        checks.append(
            Check(
                "kernel_log",
                "ok",
                "the kernel's log is readable: dxgkrnl's residency failures are counted",
            )
        )
    return checks


def host_checks(f: Facts) -> list[Check]:
    if not f.wsl:
        return [Check("wsl", "skip", "not WSL2: Windows' counters are not needed")]
    checks = []
    if f.powershell is None or f.interop_problem is not None:
        checks.append(
            Check(
                "wsl",
                "fail",
                f.interop_problem or "WSL2, but powershell.exe is not found",
                "enable WSL interop ([interop] enabled=true in /etc/wsl.conf) and keep "
                "Windows' PATH (appendWindowsPath); vramtop --no-windows derives the split",
            )
        )
        checks.append(Check("windows_counters", "skip", "no powershell.exe to read them"))
        return checks
    checks.append(Check("wsl", "ok", f"WSL2 with {f.powershell}"))
    if f.windows_error is not None:
        checks.append(
            Check(
                "windows_counters",
                "fail",
                f"Windows' GPU counters: {f.windows_error}",
                "run powershell.exe once by hand to see the error; without the counters the "
                "split is derived",
            )
        )
    elif f.windows_vm is None:
        checks.append(
            Check(
                "windows_counters",
                "warn",
                "Windows' GPU counters answer but name no WSL VM (nothing in WSL uses the GPU?)",
                "start vLLM, then run vramtop doctor again",
            )
        )
    else:
        checks.append(
            Check(
                "windows_counters", "ok", f"Windows' GPU counters name the WSL VM ({f.windows_vm})"
            )
        )
    return checks


def amd_checks(f: Facts) -> list[Check]:
    if f.amd_cards == 0:
        return [Check("amd", "skip", "no AMD card with the amdgpu driver")]
    checks = [Check("amd", "ok", f"{f.amd_cards} AMD card(s) in /sys/class/drm")]
    if f.amdsmi_error is not None:
        checks.append(
            Check(
                "amdsmi",
                "warn",
                f"{f.amdsmi_error}: sysfs and DRM fdinfo are read instead",
                "install ROCm's amdsmi package for the library's numbers (optional)",
            )
        )
    else:
        checks.append(Check("amdsmi", "ok", "amdsmi imports and works"))
    if f.fdinfo_denied:
        checks.append(
            Check(
                "fdinfo",
                "warn",
                f"{f.fdinfo_denied} process(es) belong to another user: their card memory "
                "cannot be read per process and counts as the desktop's",
                "run vramtop as the user that runs vLLM",
            )
        )
    else:
        checks.append(Check("fdinfo", "ok", "every process's DRM fdinfo is readable"))
    return checks


def server_checks(f: Facts) -> list[Check]:
    checks = []
    if f.profile_error is not None:
        checks.append(Check("profile", "fail", f.profile_error, "fix or re-import the profile"))
    elif f.profile is None:
        checks.append(
            Check(
                "profile",
                "warn",
                "no profile: vramtop can watch a server but not start or restart it",
                "vramtop import launch.sh",
            )
        )
    elif f.launch_problem is not None:
        checks.append(
            Check(
                "profile",
                "fail",
                f"profile {f.profile!r}: {f.launch_problem}",
                "give the command's full path in the profile's argv, or a prelude that "
                "activates its environment (vramtop import --force launch.sh re-imports it)",
            )
        )
    else:
        checks.append(
            Check("profile", "ok", f"profile {f.profile!r}: its launch command is found here")
        )
    if f.model_place is not None:
        checks.append(Check("model", "warn", place_words(*f.model_place), PLACE_FIX))
    s = f.server
    if s is None or not s.reachable:
        why = (s.error if s else None) or "no answer"
        checks.append(
            Check(
                "metrics",
                "warn",
                f"{f.url}/metrics: {why}",
                "start vLLM (vramtop start), or pass --url where it listens",
            )
        )
        checks.append(Check("health", "skip", "the server does not answer"))
    else:
        version = f" (vLLM {s.version})" if s.version else ""
        if s.metrics is None:
            checks.append(
                Check("metrics", "warn", f"{f.url} answers but /metrics has no vLLM series")
            )
        else:
            checks.append(Check("metrics", "ok", f"{f.url}/metrics answers{version}"))
        status: Status = "ok" if s.healthy else "fail" if s.healthy is False else "warn"
        word = {"ok": "healthy", "fail": "not healthy", "warn": "unknown"}[status]
        fix = None if s.healthy else "see the server's log (vramtop logs)"
        checks.append(Check("health", status, f"/health is {word}", fix))
    checks.append(_log_check(f.log_path))
    checks.append(_permissions_check(f.private_paths))
    return checks


def _log_check(path: Path | None) -> Check:
    if path is None:
        return Check("log", "skip", "no profile: no server log of vramtop's")
    if not path.exists():
        return Check("log", "warn", f"{path} does not exist yet", "vramtop start writes it")
    if not os.access(path, os.R_OK):
        return Check("log", "fail", f"{path} is not readable", f"chmod u+r {shell_word(str(path))}")
    return Check("log", "ok", f"{path}")


def _permissions_check(paths: list[Path]) -> Check:
    """vramtop's own directories and files must be readable only by their owner."""
    loose = []
    for path in paths:
        try:
            mode = path.stat().st_mode
        except OSError:
            continue
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            loose.append(f"{path} ({stat.filemode(mode)})")
    if loose:
        return Check(
            "permissions",
            "warn",
            "readable by others: " + ", ".join(loose),
            "chmod go= on each (they can hold logs, command lines and state)",
        )
    return Check("permissions", "ok", "vramtop's files are readable only by you")


class _Reading(Protocol):
    """What `wait_for_windows` looks at in a reading: its error, if any."""

    @property
    def error(self) -> str | None: ...


ReadingT = TypeVar("ReadingT", bound=_Reading)


def wait_for_windows(
    read: Callable[[], ReadingT], timeout_s: float, sleep: Callable[[float], None] = time.sleep
) -> ReadingT:
    """The first Windows reading that is not "waiting for PowerShell", within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    reading = read()
    while reading.error is not None and "waiting" in reading.error and time.monotonic() < deadline:
        sleep(0.2)
        reading = read()
    return reading
