"""Find every process of a server's tree, and end them all.

A vLLM tree is the API server, its `VLLM::EngineCore` and the workers. SIGKILL of the API
server leaves the EngineCore running, still holding its VRAM, with no parent to follow — so
the tree is found four ways, and a process counts if any of them names it:
- the children of the API server (while it lives);
- every process in the server's process group (the server runs in its own session, and the
  EngineCore keeps that group after its parent dies);
- every pid remembered in the state file whose start time still matches (not a reused pid);
- every process whose environment carries the launch id vramtop gave the server.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Iterable, Sequence

import psutil

from vramtop.core.vllm import args as vllm_args

log = logging.getLogger(__name__)

LAUNCH_ID_ENV = "VRAMTOP_LAUNCH_ID"
# Beside the launch id: the profile it was launched for, so that a record lost (its state
# file deleted or damaged) is rebuilt from the server's own process for that profile only.
PROFILE_ENV = "VRAMTOP_PROFILE"


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _reap(pid: int) -> None:
    """Collect our own dead child so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def process_alive(pid: int | None, create_time: float | None = None) -> bool:
    """Whether `pid` runs and is the same process as when it was recorded.

    Asked at every tick's look (`settling`) and by housekeeping, so once psutil has said
    yes for a pid and its recorded start, later asks read the process's start (in clock
    ticks since boot) and its state off /proc/<pid>/stat alone: the same start and not a
    zombie is the same live process. Anything else is asked of psutil again."""
    if not pid:
        return False
    known = _confirmed.get((pid, create_time)) if create_time is not None else None
    if known is not None and _start_and_state(pid) == (known, "running"):
        return True
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():  # one read of /proc/<pid>/stat for both questions (every tick)
            if create_time is not None and abs(proc.create_time() - create_time) > 0.05:
                return False
            zombie = proc.status() == psutil.STATUS_ZOMBIE
        if zombie:
            _reap(pid)
            return False
    except psutil.Error:
        return False
    if create_time is not None:
        seen = _start_and_state(pid)
        # Kept only when /proc's start is the recorded one too (the pid was not reused in
        # between): psutil reckons a start the same way.
        if (
            seen is not None
            and seen[1] == "running"
            and abs(seen[0] / _CLOCK_TICKS + psutil.boot_time() - create_time) <= 0.05
        ):
            if len(_confirmed) >= _CONFIRMED_KEPT:
                _confirmed.clear()
            _confirmed[(pid, create_time)] = seen[0]
    return True


# (pid, recorded create time) -> the start in clock ticks /proc gave when psutil confirmed it.
_confirmed: dict[tuple[int, float], int] = {}
_CONFIRMED_KEPT = 64
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _start_and_state(pid: int) -> tuple[int, str] | None:
    """The process's start (clock ticks since boot) and "zombie" or "running" (any state but
    a zombie's) from /proc/<pid>/stat; None where it cannot be read (gone, or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return int(fields[19]), "zombie" if fields[0] == b"Z" else "running"
    except (OSError, IndexError, ValueError):
        return None


def find_tree(
    pid: int | None,
    pgid: int | None,
    remembered: dict[str, float] | None = None,
    launch_id: str | None = None,
    argv: Sequence[str] | None = None,
) -> dict[int, psutil.Process]:
    """Every live process of the server's tree, by pid.

    The state file is not taken on its word: a damaged or forged one must not make a stop
    signal someone else's process. The root (`pid`) counts only where it is the server
    (`belongs`: its launch id, a vLLM process, or the command line it was adopted with), and
    so do the processes found by the group, the remembered tree or the launch id; the root's
    own descendants are the server's."""
    found: dict[int, psutil.Process] = {}
    me = os.getpid()

    def add(proc: psutil.Process) -> None:
        if proc.pid != me and _alive(proc):
            found[proc.pid] = proc

    if pid and process_alive(pid, (remembered or {}).get(str(pid))):
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(pid)
            if belongs(root, launch_id, argv):
                add(root)
                for child in root.children(recursive=True):
                    add(child)
    for key, created in (remembered or {}).items():
        with contextlib.suppress(psutil.Error, ValueError):
            proc = psutil.Process(int(key))
            if abs(proc.create_time() - created) <= 0.05 and belongs(proc, launch_id):
                add(proc)
    if pgid == os.getpgid(0):
        pgid = None  # never our own group: that would be vramtop and its terminal
    if pgid or launch_id:
        for proc in psutil.process_iter():
            if proc.pid in found or proc.pid == me:
                continue
            in_group = pgid is not None and _pgid(proc.pid) == pgid
            carries = bool(launch_id) and _has_launch_id(proc, launch_id or "")
            if carries or (in_group and belongs(proc, launch_id)):
                add(proc)
    # Children of anything found (a worker whose EngineCore left the group).
    for proc in list(found.values()):
        with contextlib.suppress(psutil.Error):
            for child in proc.children(recursive=True):
                add(child)
    return found


def belongs(proc: psutil.Process, launch_id: str | None, argv: Sequence[str] | None = None) -> bool:
    """Whether a process is a server's: it carries the launch id vramtop gave the server, it
    is a vLLM process by its name or command line (vLLM's processes retitle themselves,
    `VLLM::EngineCore`, which hides their environment), or it runs the command line a server
    vramtop adopted was recorded with (masked as recorded). A process of another user, whose
    environment and command line cannot be read, never is."""
    if launch_id and _has_launch_id(proc, launch_id):
        return True
    if looks_like_vllm(proc):
        return True
    if argv:
        with contextlib.suppress(psutil.Error, OSError):
            return list(vllm_args.mask_secrets(proc.cmdline())) == list(argv)
    return False


def is_server(
    pid: int, create_time: float | None, launch_id: str | None, argv: Sequence[str] | None
) -> bool:
    """`belongs` for the live process `pid` (recorded with `create_time`), remembered for as
    long as that process lives."""
    key = (pid, create_time, launch_id, tuple(argv or ()))
    known = _owned.get(key) if create_time is not None else None
    if known is not None:
        return known
    try:
        owned = belongs(psutil.Process(pid), launch_id, argv)
    except psutil.Error:
        return False
    if len(_owned) > 64:
        _owned.clear()
    _owned[key] = owned
    return owned


def looks_like_vllm(proc: psutil.Process) -> bool:
    """A process of a vLLM server by its name or command line (`VLLM::EngineCore`, `vllm
    serve`, `vllm.entrypoints…`)."""
    try:
        words = " ".join([proc.name(), *proc.cmdline()]).lower()
    except (psutil.Error, OSError):
        return False
    return "vllm" in words


# The answers of `is_server` for a pid and its start (a process's launch id and command line do
# not change while it lives).
_owned: dict[tuple[int, float | None, str | None, tuple[str, ...]], bool] = {}


def find_by_launch_id(launch_id: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter() if _alive(p) and _has_launch_id(p, launch_id)]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _has_launch_id(proc: psutil.Process, launch_id: str) -> bool:
    try:
        return proc.environ().get(LAUNCH_ID_ENV) == launch_id
    except (psutil.Error, OSError):
        return False


def describe(procs: Iterable[psutil.Process]) -> str:
    parts = []
    for proc in procs:
        try:
            parts.append(f"{proc.pid} ({proc.name()})")
        except psutil.Error:
            parts.append(str(proc.pid))
    return ", ".join(parts)


def signal_tree(procs: dict[int, psutil.Process], pgid: int | None, sig: int) -> None:
    """Send `sig` to the whole group and to every tree process outside it.

    Each process gets the signal once: a second SIGTERM can land while a server is still
    handling the first (vLLM treats a repeated signal as "abort now"; a Python handler
    re-entered mid-way can deadlock)."""
    group_signalled = False
    if pgid and pgid > 1 and pgid != os.getpgid(0):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
            group_signalled = True
    for proc in procs.values():
        if group_signalled and _pgid(proc.pid) == pgid:
            continue
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)


def end_tree(
    pid: int | None,
    pgid: int | None,
    remembered: dict[str, float] | None,
    launch_id: str | None,
    term_timeout_s: float,
    kill_timeout_s: float = 5.0,
    found: dict[int, psutil.Process] | None = None,
) -> list[psutil.Process]:
    """SIGTERM the tree, wait, SIGKILL what is left, wait again. Returns the survivors
    (empty when the whole tree is gone). `found`: the tree as the caller just found it (a
    scan of every process spared before the SIGTERM)."""
    procs = find_tree(pid, pgid, remembered, launch_id) if found is None else found
    if not procs and not (pgid and _group_exists(pgid)):
        return []
    signal_tree(procs, pgid, signal.SIGTERM)
    left = _wait_gone(pid, pgid, remembered, launch_id, procs, term_timeout_s)
    if not left:
        return []
    log.info("still running after SIGTERM: %s; sending SIGKILL", describe(left.values()))
    signal_tree(left, pgid, signal.SIGKILL)
    left = _wait_gone(pid, pgid, remembered, launch_id, left, kill_timeout_s)
    return list(left.values())


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _wait_gone(
    pid: int | None,
    pgid: int | None,
    remembered: dict[str, float] | None,
    launch_id: str | None,
    procs: dict[int, psutil.Process],
    timeout_s: float,
) -> dict[int, psutil.Process]:
    """Wait until no process of the tree is left, re-scanning (a child may appear late)."""
    deadline = time.monotonic() + timeout_s
    step = 0.02
    while True:
        for p in procs:
            _reap(p)
        # wait_procs reaps our own children and returns as soon as all of them are gone.
        _gone, alive = psutil.wait_procs(list(procs.values()), timeout=step)
        if not alive:
            procs = find_tree(None, pgid, remembered, launch_id)
            if not procs:
                return {}
        else:
            procs = {p.pid: p for p in alive if _alive(p)}
            if not procs:
                continue
        if time.monotonic() >= deadline:
            return procs
        step = min(step * 1.5, 0.2)
