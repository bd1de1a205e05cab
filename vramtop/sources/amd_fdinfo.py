"""Per-process memory on amdgpu read the way nvtop reads it: DRM fdinfo.

`/proc/PID/fdinfo/FD` of every fd open on `/dev/dri/*` says `drm-driver: amdgpu`, `drm-pdev`,
`drm-client-id`, `drm-memory-vram` and `drm-memory-gtt` (in KiB). One DRM client can sit
behind several fds and processes (dup, fork): it is counted once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vramtop.core.model import ProcessMemory
from vramtop.sources.host import process_name

PROC_ROOT = Path("/proc")
_UNITS = {"": 1, "b": 1, "kib": 1024, "kb": 1024, "mib": 1024**2, "mb": 1024**2, "gib": 1024**3}


@dataclass(frozen=True)
class DrmClient:
    """One DRM client as its fdinfo describes it."""

    pdev: str  # the card's PCI address, e.g. 0000:03:00.0
    client_id: str
    vram_bytes: int
    gtt_bytes: int


def _bytes(value: str) -> int | None:
    words = value.split()
    if not words or not words[0].isdigit():
        return None
    unit = words[1].lower() if len(words) > 1 else ""
    return int(words[0]) * _UNITS[unit] if unit in _UNITS else None


def parse_fdinfo(text: str) -> DrmClient | None:
    """An amdgpu client from one fdinfo file; None for any other file or driver."""
    keys: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            keys[key.strip()] = value.strip()
    if keys.get("drm-driver") != "amdgpu" or "drm-client-id" not in keys:
        return None

    def region(name: str) -> int:
        # Older kernels print drm-memory-*; newer ones drm-resident-* beside drm-total-*.
        for prefix in ("drm-memory-", "drm-resident-", "drm-total-"):
            value = keys.get(prefix + name)
            if value is not None:
                return _bytes(value) or 0
        return 0

    return DrmClient(
        pdev=keys.get("drm-pdev", ""),
        client_id=keys["drm-client-id"],
        vram_bytes=region("vram"),
        gtt_bytes=region("gtt"),
    )


@dataclass
class FdinfoScan:
    """Every amdgpu client's memory by card and pid, and what could not be read."""

    by_pdev: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)
    denied_pids: int = 0  # processes whose fds are not ours to read (another user's)


def _pids(proc_root: Path) -> Iterator[int]:
    try:
        names = os.listdir(proc_root)
    except OSError:
        return
    for name in names:
        if name.isdigit():
            yield int(name)


# Which fds of which process are open on /dev/dri changes rarely; finding them means listing
# and reading the links of every fd of every process. Like amdgpu_top, the full search runs
# every few seconds; a process not seen before is searched at once (a restarted server keeps
# its share), and only the fdinfo of the fds found is read each tick.
INDEX_REFRESH_S = 5.0


class FdinfoIndex:
    """The fds on /dev/dri of every process, searched in full every `refresh_s`."""

    def __init__(
        self,
        proc_root: Path = PROC_ROOT,
        refresh_s: float = INDEX_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.proc_root = proc_root
        self.refresh_s = refresh_s
        self._clock = clock
        self._fds: dict[int, list[str] | None] = {}  # None: not ours to read
        self._searched_at: float | None = None

    def _search(self, pid: int) -> list[str] | None:
        fd_dir = self.proc_root / str(pid) / "fd"
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            return None
        except OSError:
            return []  # the process is gone
        found = []
        for fd in fds:
            try:
                if os.readlink(fd_dir / fd).startswith("/dev/dri/"):
                    found.append(fd)
            except OSError:
                continue
        return found

    def scan(self) -> FdinfoScan:
        """Every amdgpu client's memory now, by card and pid (each client counted once)."""
        now = self._clock()
        full = self._searched_at is None or now - self._searched_at >= self.refresh_s
        if full:
            self._searched_at = now
        pids = list(_pids(self.proc_root))
        self._fds = {
            pid: self._search(pid) if full or pid not in self._fds else self._fds[pid]
            for pid in pids
        }
        scan = FdinfoScan(denied_pids=sum(fds is None for fds in self._fds.values()))
        seen: set[tuple[str, str]] = set()
        for pid, fds in self._fds.items():
            for fd in fds or ():
                try:
                    path = self.proc_root / str(pid) / "fdinfo" / fd
                    text = path.read_text(errors="replace")
                except OSError:
                    continue
                client = parse_fdinfo(text)
                if client is None or (client.pdev, client.client_id) in seen:
                    continue
                seen.add((client.pdev, client.client_id))
                per_pid = scan.by_pdev.setdefault(client.pdev, {})
                vram, gtt = per_pid.get(pid, (0, 0))
                per_pid[pid] = (vram + client.vram_bytes, gtt + client.gtt_bytes)
        return scan


def scan_fdinfo(proc_root: Path = PROC_ROOT) -> FdinfoScan:
    """Read the fdinfo of every fd open on /dev/dri in every process we may look at."""
    return FdinfoIndex(proc_root).scan()


def processes_from(per_pid: dict[int, tuple[int, int]]) -> tuple[ProcessMemory, ...]:
    return tuple(
        ProcessMemory(pid=pid, name=process_name(pid), used_bytes=vram, gtt_bytes=gtt)
        for pid, (vram, gtt) in sorted(per_pid.items(), key=lambda item: -item[1][0])
    )
