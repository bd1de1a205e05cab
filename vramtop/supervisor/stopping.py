"""Ending a server: the whole process tree, then a bounded wait until the GPU shows its
memory given back (a stop that says "stopped" while the driver still holds the VRAM would be
contradicted by the next start)."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Collection
from typing import Protocol

import psutil

from vramtop.core.model import GpuReading
from vramtop.outcomes import ProgressCallback
from vramtop.supervisor import tree
from vramtop.supervisor.state import ServerRecord

log = logging.getLogger(__name__)

# Either `memory_released() -> bool` or `memory_released(pids) -> bool` (pids of the tree
# that was just stopped).
MemoryReleased = Callable[..., bool]

_POLL_S = 0.05


def end_server(
    rec: ServerRecord,
    *,
    stop_timeout_s: float,
    reap: Callable[[], None],
    memory_released: MemoryReleased | None,
    release_timeout_s: float,
    progress: ProgressCallback | None,
    found: dict[int, psutil.Process] | None = None,
    mark: Callable[[str], None] | None = None,
) -> tuple[list[psutil.Process], bool]:
    """End the whole tree, then wait (bounded) until the GPU shows the memory back.

    Returns the processes that survived (none: `rec.tree` is emptied) and whether the memory
    was seen released. `reap` collects the server when this process is its parent. `found`:
    the tree as the caller just found it (no second scan of every process before SIGTERM).
    `mark`: told each moment of the stop as it comes (`sigterm`, `exited`: the tree gone,
    `memory_released`), for the step's phases."""
    moment = mark or (lambda _name: None)
    who = tree.identity_of(rec)
    procs = tree.find_tree(who) if found is None else found
    pids = frozenset(procs) | {int(p) for p in rec.tree}
    began = time.monotonic()
    log.info("ending %s: SIGTERM, SIGKILL after %.1f s", sorted(procs), stop_timeout_s)
    moment("sigterm")
    survivors = tree.end_tree(who, stop_timeout_s, found=procs)
    reap()
    if not survivors:
        moment("exited")
        log.info("tree gone %.2f s after SIGTERM", time.monotonic() - began)
    if survivors:
        return survivors, True
    released = True
    if pids:
        released = wait_memory_released(memory_released, pids, release_timeout_s)
        if released:
            moment("memory_released")
        if progress is not None:
            progress("memory released" if released else "memory not yet released")
    rec.tree = {}
    return [], released


def wait_memory_released(
    check: MemoryReleased | None, pids: frozenset[int], timeout_s: float
) -> bool:
    if check is None:
        return True
    takes_pids = _takes_argument(check)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if check(pids) if takes_pids else check():
                return True
        except Exception:  # a probe failing must not wedge a stop
            log.exception("memory-release check failed")
            return False
        if time.monotonic() > deadline:
            return False
        time.sleep(_POLL_S)


def _takes_argument(func: Callable[..., bool]) -> bool:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params
    )


class GpuProbe(Protocol):
    def read(self) -> GpuReading: ...


def memory_released_on(probe: GpuProbe) -> Callable[[Collection[int]], bool]:
    """The supervisor's "has the GPU let go" check, from what this probe can see.

    With per-process numbers: none of the stopped pids holds memory any more. Without them
    (WSL2) nothing can be checked per process; the stop is then trusted once the tree is gone.
    """

    def released(pids: Collection[int]) -> bool:
        reading = probe.read()
        if not reading.devices:
            return True
        stopped = set(pids)
        for device in reading.devices:
            if device.processes is None:
                return True
            if any(p.pid in stopped for p in device.processes):
                return False
        return True

    return released
