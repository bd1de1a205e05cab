"""Find every process of a server's tree, and end them all.

A vLLM tree is the API server, its `VLLM::EngineCore` and the workers. SIGKILL of the API
server leaves the EngineCore running, still holding its VRAM, with no parent to follow. A
state file is anyone's to write, so no pid it names is signalled on its word: what proves a
process is the server is read back from the process itself (`Identity`: for a launch, the
launch id and profile vramtop put in its environment, which vLLM's retitled processes keep
since the launch sets `SPT_NOENV`; for an adopted server, its pid, start and command line as
recorded). The tree is then what descends from the proven processes: their children, and
for a launch the other members of its own session (the EngineCore keeps it after its parent
dies, and only a fork inside a session can join it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psutil

from vramtop.core.vllm import args as vllm_args

if TYPE_CHECKING:
    from vramtop.supervisor.state import ServerRecord

log = logging.getLogger(__name__)

LAUNCH_ID_ENV = "VRAMTOP_LAUNCH_ID"
# Beside the launch id: the profile it was launched for, so that a record lost (its state
# file deleted or damaged) is rebuilt from the server's own process for that profile only.
PROFILE_ENV = "VRAMTOP_PROFILE"
# Put into every launch's environment: setproctitle (vLLM's `VLLM::EngineCore` title) then
# leaves the environment where it is instead of writing the title over it, so the launch id
# stays readable in /proc/PID/environ of every process of the tree.
KEEP_ENVIRON = {"SPT_NOENV": "1"}


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _reap(pid: int) -> None:
    """Collect our own dead child so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


# How far two readings of one process's start may differ. psutil reckons a start as the
# process's clock ticks since boot plus the boot time, which /proc/stat gives in whole seconds
# worked out from the wall clock: when the clock is adjusted (a VM's clock kept in step) that
# boot time can move by a second, and the same process then reads as started a second
# earlier or later. Within a few hundredths of a second of a whole-second shift (at most
# two) is the same start; a pid given to another process would have to have started at
# exactly such an offset.
_SAME_START_S = 0.05
_BOOT_SHIFT_S = 2


def same_start(seen: float, recorded: float) -> bool:
    """Whether two readings of a process's start (psutil's `create_time`, seconds since the
    epoch) are the same start: equal within 0.05 s, or apart by a whole second or two of a
    shifted boot time."""
    apart = abs(seen - recorded)
    return apart <= _SAME_START_S or (
        apart <= _BOOT_SHIFT_S + _SAME_START_S and abs(apart - round(apart)) <= _SAME_START_S
    )


def process_alive(pid: int | None, create_time: float | None = None) -> bool:
    """Whether `pid` runs and is the same process as when it was recorded (its start the same
    as `create_time` by `same_start`, when given), a zombie counting as dead (and reaped).

    Asked of psutil on every tick's look (`settling`) and by housekeeping, a few times a
    second: ~0.06 ms each, too little to read /proc/<pid>/stat by hand for
    (`python -m bench.bench_own_code`, "alive")."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():  # one read of /proc/<pid>/stat for both questions
            if create_time is not None and not same_start(proc.create_time(), create_time):
                return False
            zombie = proc.status() == psutil.STATUS_ZOMBIE
        if zombie:
            _reap(pid)
            return False
    except psutil.Error:
        return False
    return True


@dataclass(frozen=True)
class Identity:
    """What proves that a process is a profile's server, read back from the process itself
    (a state file is anyone's to write, and never taken on its word).

    - A server vramtop launched (`launch_id` set): its environment carries this launch's id
      (`VRAMTOP_LAUNCH_ID`) and this profile's name (`VRAMTOP_PROFILE`), both as recorded.
    - A server adopted (`vramtop attach`, `adopted_argv` set): the pid, its start
      (`create_time`) and its command line (masked) are the ones recorded when the person
      named it, and it carries no other profile's launch.
    Anything else (a record with neither, a pid without its start) proves nothing."""

    profile: str
    pid: int | None = None
    create_time: float | None = None
    launch_id: str | None = None
    adopted_argv: tuple[str, ...] | None = None
    pgid: int | None = None  # the group a launch leads (its own session's)


def identity_of(rec: ServerRecord) -> Identity:
    """What proves a process is the record's server: the launch id a vramtop start put in
    its environment, or the command line an adopted server was recorded with (`attach`
    writes `started_by = "attached"` and no launch id). A record with neither proves none."""
    adopted = rec.started_by == "attached" and not rec.launch_id and rec.argv
    return Identity(
        profile=rec.profile,
        pid=rec.pid,
        create_time=rec.create_time,
        launch_id=rec.launch_id,
        adopted_argv=tuple(rec.argv) if adopted else None,
        pgid=rec.pgid,
    )


def carries_launch(proc: psutil.Process, who: Identity) -> bool:
    """Whether the process's environment carries this launch's id and this profile's name."""
    if not who.launch_id:
        return False
    try:
        env = proc.environ()
    except (psutil.Error, OSError):
        return False
    return env.get(LAUNCH_ID_ENV) == who.launch_id and env.get(PROFILE_ENV) == who.profile


def launched_for(proc: psutil.Process) -> str | None:
    """The profile vramtop launched this process for (`VRAMTOP_PROFILE`), None when it did
    not launch it (or its environment cannot be read)."""
    try:
        env = proc.environ()
    except (psutil.Error, OSError):
        return None
    return env.get(PROFILE_ENV) if env.get(LAUNCH_ID_ENV) else None


def verified_root(who: Identity) -> psutil.Process | None:
    """The recorded pid's process, when it is the server `who` names (see `Identity`)."""
    if not who.pid or who.create_time is None or who.pid == os.getpid():
        return None
    if not process_alive(who.pid, who.create_time):
        return None
    try:
        proc = psutil.Process(who.pid)
        if who.launch_id:
            return proc if carries_launch(proc, who) else None
        if who.adopted_argv:
            owner = launched_for(proc)
            same = tuple(vllm_args.mask_secrets(proc.cmdline())) == who.adopted_argv
            return proc if same and owner in (None, who.profile) else None
    except (psutil.Error, OSError):
        return None
    return None


def find_tree(who: Identity) -> dict[int, psutil.Process]:
    """Every live process of the server's tree, by pid: the verified root (`verified_root`)
    and, for a launch, every process carrying its id; then every process that descends from
    one of them: their children, and (a launch runs in a session of its own) the other
    members of their sessions, which only a fork inside that session can make (an
    EngineCore whose parent was SIGKILLed, a worker that retitled itself). Never vramtop
    itself, nor its own session."""
    found: dict[int, psutil.Process] = {}
    me = os.getpid()

    def add(proc: psutil.Process) -> None:
        if proc.pid != me and _alive(proc):
            found[proc.pid] = proc

    root = verified_root(who)
    if root is not None:
        add(root)
    if who.launch_id:
        by_session: dict[int, list[psutil.Process]] = {}
        for proc in psutil.process_iter():
            if proc.pid == me:
                continue
            if proc.pid not in found and carries_launch(proc, who):
                add(proc)
            session = _sid(proc.pid)
            if session is not None:
                by_session.setdefault(session, []).append(proc)
        ours = {_sid(pid) for pid in found} - {None, 0, 1, _sid(me)}
        for session in ours:
            for proc in by_session.get(session or 0, []):
                add(proc)
    for proc in list(found.values()):
        with contextlib.suppress(psutil.Error):
            for child in proc.children(recursive=True):
                add(child)
    return found


def is_server(who: Identity) -> bool:
    """`verified_root` for a live process, remembered for as long as that process lives (its
    environment's launch and its command line do not change)."""
    key = (who.pid, who.create_time, who.launch_id, who.profile, who.adopted_argv)
    known = _owned.get(key) if who.create_time is not None else None
    if known is not None:
        return known
    owned = verified_root(who) is not None
    if len(_owned) > 64:
        _owned.clear()
    _owned[key] = owned
    return owned


# The answers of `is_server`.
_owned: dict[tuple[object, ...], bool] = {}


def find_by_launch_id(who: Identity) -> list[psutil.Process]:
    """The live processes carrying this launch (its id and profile)."""
    return [p for p in psutil.process_iter() if _alive(p) and carries_launch(p, who)]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _sid(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def describe(procs: Iterable[psutil.Process]) -> str:
    parts = []
    for proc in procs:
        try:
            parts.append(f"{proc.pid} ({proc.name()})")
        except psutil.Error:
            parts.append(str(proc.pid))
    return ", ".join(parts)


def signal_tree(procs: dict[int, psutil.Process], group: int | None, sig: int) -> None:
    """Send `sig` to the whole `group` and to every tree process outside it.

    Each process gets the signal once: a second SIGTERM can land while a server is still
    handling the first (vLLM treats a repeated signal as "abort now"; a Python handler
    re-entered mid-way can deadlock)."""
    group_signalled = False
    if group and group > 1 and group != os.getpgid(0):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
            group_signalled = True
    for proc in procs.values():
        if group_signalled and _pgid(proc.pid) == group:
            continue
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)


def our_group(who: Identity, procs: dict[int, psutil.Process]) -> int | None:
    """The process group a stop may signal whole: a launch's own (led by one of its verified
    processes, so in its session: every member descends from the launch). None for an
    adopted server, whose group may be a terminal's job with other programs in it."""
    if not who.launch_id or who.pgid is None or who.pgid not in procs:
        return None
    return who.pgid if _pgid(who.pgid) == who.pgid else None


def end_tree(
    who: Identity,
    term_timeout_s: float,
    kill_timeout_s: float = 5.0,
    found: dict[int, psutil.Process] | None = None,
) -> list[psutil.Process]:
    """SIGTERM the tree, wait, SIGKILL what is left, wait again. Returns the survivors
    (empty when the whole tree is gone). `found`: the tree as the caller just found it (a
    scan of every process spared before the SIGTERM)."""
    procs = find_tree(who) if found is None else found
    if not procs:
        return []
    group = our_group(who, procs)
    signal_tree(procs, group, signal.SIGTERM)
    left = _wait_gone(who, procs, term_timeout_s)
    if not left:
        return []
    log.info("still running after SIGTERM: %s; sending SIGKILL", describe(left.values()))
    signal_tree(left, group if group in left else None, signal.SIGKILL)
    left = _wait_gone(who, left, kill_timeout_s)
    return list(left.values())


def _wait_gone(
    who: Identity, procs: dict[int, psutil.Process], timeout_s: float
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
            procs = find_tree(who)
            if not procs:
                return {}
        else:
            procs = {p.pid: p for p in alive if _alive(p)}
            if not procs:
                continue
        if time.monotonic() >= deadline:
            return procs
        step = min(step * 1.5, 0.2)
