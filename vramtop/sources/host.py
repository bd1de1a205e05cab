"""Facts about the machine vramtop runs on."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def is_wsl(proc_version: Path = Path("/proc/version")) -> bool:
    """True inside WSL (WSL2's kernel names Microsoft in its release and /proc/version)."""
    if os.environ.get("WSL_DISTRO_NAME"):
        return True
    if "microsoft" in platform.release().lower():
        return True
    try:
        return "microsoft" in proc_version.read_text(errors="replace").lower()
    except OSError:
        return False


MEMINFO = Path("/proc/meminfo")


def read_meminfo(path: Path = MEMINFO) -> tuple[int, int] | None:
    """(MemTotal, MemAvailable) in bytes, or None when the file cannot be read.

    MemAvailable is what the kernel can hand out without swapping: free memory plus the
    reclaimable page cache, so a file cache left by reading a model is not counted as used.
    """
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        words = rest.split()
        if key in ("MemTotal", "MemAvailable") and words and words[0].isdigit():
            unit = words[1].lower() if len(words) > 1 else ""
            values[key] = int(words[0]) * (1024 if unit == "kb" else 1)
    if "MemTotal" not in values or "MemAvailable" not in values:
        return None
    return values["MemTotal"], values["MemAvailable"]


def process_name(pid: int) -> str:
    """The process's name, or "pid N" when it is gone or not ours to read."""
    import psutil  # here: watching a server (`--once --url`) may never name a process

    try:
        return psutil.Process(pid).name()
    except (psutil.Error, OSError):
        return f"pid {pid}"
