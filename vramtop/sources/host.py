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
