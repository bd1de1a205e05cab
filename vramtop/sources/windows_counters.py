"""Windows' GPU memory counters, read from inside WSL2 through one long-lived PowerShell.

PowerShell takes seconds to start and the first CIM query of the GPU counters takes more, so
one process runs a loop that prints a compressed JSON line every `interval_s`; a reader thread
keeps the newest line parsed into a `WindowsGpuReading`, and `read()` returns it at once (the
console's tick never waits on Windows). If PowerShell dies, it is started again with backoff.
Every way this can fail ends as a reading whose `error` says why, never as an exception.

The script and its command line are `wsl_powershell`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from vramtop.core.windows.powershell import parse_line
from vramtop.core.windows.reading import WindowsGpuReading, unavailable
from vramtop.programs import WINDOWS_DRIVE, windows_cwd
from vramtop.sources.host import is_wsl
from vramtop.sources.wsl_powershell import (
    describe_exit,
    find_powershell,
    interop_problem,
    powershell_argv,
)

DEFAULT_INTERVAL_S = 2.0
# After a death: wait this long before each new start (the last value repeats).
DEFAULT_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)


class WindowsGpuSource:
    """One PowerShell loop in the background; `read()` never blocks."""

    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        *,
        powershell: str | None = None,
        env: Mapping[str, str] | None = None,
        backoff_s: Sequence[float] = DEFAULT_BACKOFF_S,
        stale_after_s: float | None = None,
        hang_after_s: float | None = None,
        check_interop: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        windows_drive: Path = WINDOWS_DRIVE,
    ) -> None:
        self.interval_s = interval_s
        self._windows_drive = windows_drive
        self._env = dict(os.environ if env is None else env)
        self._powershell = powershell
        self._backoff = tuple(backoff_s) or (1.0,)
        # A reading older than this is no longer shown as current (three missed lines).
        self.stale_after_s = stale_after_s if stale_after_s is not None else 3 * interval_s + 5
        # A PowerShell silent this long (a CIM query that never returns) is killed and started
        # again; generous, because the first query after a start can take many seconds.
        self.hang_after_s = (
            hang_after_s if hang_after_s is not None else max(2 * self.stale_after_s, 30.0)
        )
        self._check_interop = is_wsl() if check_interop is None else check_interop
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._latest: WindowsGpuReading | None = None  # newest line, good or an error line
        self._latest_at: float | None = None
        self._started_at: float | None = None  # this PowerShell's start
        self._problem: str | None = None  # why there is no PowerShell right now
        self._last_failure: str | None = None  # why the previous PowerShell stopped
        self._heard_at = 0.0  # time.monotonic() of this PowerShell's start or last line
        self.restarts = 0  # PowerShell processes started after the first
        self.lines = 0  # lines read over the source's life

    # -- public ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start the background loop (idempotent; `read()` also starts it)."""
        with self._lock:
            if self._thread is not None or self._stop.is_set():
                return
            self._thread = threading.Thread(
                target=self._run, name="windows-gpu-source", daemon=True
            )
            self._thread.start()
        # A console that exits without close() must not leave PowerShell looping on Windows.
        atexit.register(self.close)

    def read(self) -> WindowsGpuReading:
        """The newest reading, or a reading whose error says why there is none. Immediate."""
        self.start()
        now = self._clock()
        if self._stop.is_set():
            return unavailable("the Windows source was closed", now)
        with self._lock:
            latest, latest_at = self._latest, self._latest_at
            started_at, problem = self._started_at, self._problem
            last_failure = self._last_failure
        if problem is not None:
            return unavailable(problem, now)
        if latest is not None and latest_at is not None:
            age = now - latest_at
            if age <= self.stale_after_s:
                return latest
            return unavailable(f"PowerShell has not answered for {age:.0f} s", now)
        if started_at is not None:
            waited = f"started {now - started_at:.0f} s ago"
            if last_failure is not None:
                return unavailable(f"{last_failure}; restarted PowerShell ({waited})", now)
            return unavailable(f"waiting for PowerShell ({waited})", now)
        return unavailable("waiting for PowerShell to start", now)

    def close(self) -> None:
        """Stop the loop and kill PowerShell (its Linux-side process and the pipe with it)."""
        self._stop.set()
        atexit.unregister(self.close)
        with self._lock:
            proc = self._proc
        if proc is not None:
            _kill(proc)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def __enter__(self) -> WindowsGpuSource:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the loop -------------------------------------------------------------------------
    def _run(self) -> None:
        failures = 0
        first = True
        while not self._stop.is_set():
            try:
                produced = self._run_once(first)
            except Exception as exc:  # a bug here must not leave read() waiting forever
                self._set_problem(f"the Windows source failed: {exc}")
                produced = False
            first = False
            if self._stop.is_set():
                break
            failures = 0 if produced else failures + 1
            delay = self._backoff[min(failures, len(self._backoff) - 1)] if failures else 0.0
            # Even after a good run, pause briefly so a PowerShell that dies at once after
            # each line cannot spin.
            self._stop.wait(max(delay, self._backoff[0] if not produced else 0.05))

    def _run_once(self, first: bool) -> bool:
        """Run one PowerShell until it exits; True when it printed at least one good line."""
        executable = self._powershell or find_powershell(self._env.get("PATH"))
        if executable is None:
            self._set_problem(
                "powershell.exe not found (not on PATH, nor at "
                "/mnt/c/Windows/System32/WindowsPowerShell/v1.0/)"
            )
            return False
        if self._check_interop:
            problem = interop_problem()
            if problem is not None:
                self._set_problem(problem)
                return False
        try:
            proc = subprocess.Popen(
                powershell_argv(executable, self.interval_s),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env,
                cwd=windows_cwd(self._windows_drive),  # (from Linux's file system: seconds)
                start_new_session=True,  # its own group: close() kills everything it started
            )
        except OSError as exc:
            reason = exc.strerror or str(exc)
            if "exec format" in reason.lower():
                self._set_problem(describe_exit(None, [reason]))
            else:
                self._set_problem(f"cannot run {executable}: {reason}")
            return False
        with self._lock:
            self._proc = proc
            self._started_at = self._clock()
            self._problem = None
            self._latest = None
            self._latest_at = None
            self._heard_at = time.monotonic()
            if not first:
                self.restarts += 1
        if self._stop.is_set():
            # close() ran while this PowerShell was starting and did not see it: kill it here.
            _kill(proc, close_streams=True)
            return False
        stderr_tail: deque[str] = deque(maxlen=20)
        err_thread = threading.Thread(
            target=_drain, args=(proc.stderr, stderr_tail), name="windows-gpu-stderr", daemon=True
        )
        err_thread.start()
        hung, read = threading.Event(), threading.Event()
        threading.Thread(
            target=self._watch, args=(proc, hung, read), name="windows-gpu-watchdog", daemon=True
        ).start()
        produced = False
        assert proc.stdout is not None
        for raw in bounded_lines(proc.stdout):
            if self._stop.is_set():
                break
            if raw is None:
                continue  # longer than any reading: dropped, and no sign of life either
            reading = parse_line(raw.decode("utf-8", errors="replace"), self._clock())
            produced = produced or reading.available
            with self._lock:
                if reading.available:
                    self._last_failure = None
                self._heard_at = time.monotonic()
                self._latest = reading
                self._latest_at = reading.t
                self.lines += 1
        read.set()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2)  # stdout closed: PowerShell is on its way out
        _kill(proc, close_streams=True)
        err_thread.join(timeout=2)
        if not self._stop.is_set():
            reason = describe_exit(proc.returncode, list(stderr_tail))
            if hung.is_set():
                reason = f"PowerShell stopped answering for {self.hang_after_s:.0f} s"
            with self._lock:
                self._last_failure = reason
            self._set_problem(reason)
        return produced

    def _watch(
        self, proc: subprocess.Popen[bytes], hung: threading.Event, read: threading.Event
    ) -> None:
        """Until its output is `read` to its end: kill `proc` when it has printed nothing for
        `hang_after_s`, and what is left of its group once it has exited (a child holding its
        output would keep the reader waiting forever); the loop restarts it."""
        step = min(1.0, self.hang_after_s / 4)
        while not self._stop.wait(step) and not read.is_set():
            if proc.poll() is not None:
                _kill(proc)
                return
            with self._lock:
                silent_s = time.monotonic() - self._heard_at
            if silent_s > self.hang_after_s:
                hung.set()
                _kill(proc)
                return

    def _set_problem(self, reason: str) -> None:
        with self._lock:
            self._problem = reason
            self._proc = None


# The longest line PowerShell's loop prints (one reading: a few KB with every desktop
# program); a longer one is dropped piece by piece, never buffered whole.
MAX_READING_BYTES = 256 * 1024


def bounded_lines(stream: IO[bytes], limit: int = MAX_READING_BYTES) -> Iterator[bytes | None]:
    """The lines of `stream`, each at most `limit` bytes; None for a longer one, whose rest is
    read and dropped in `limit`-sized pieces (800 MiB without a newline was buffered whole)."""
    while True:
        raw = stream.readline(limit + 1)
        if not raw:
            return
        if len(raw) <= limit or raw.endswith(b"\n"):
            yield raw
            continue
        while (rest := stream.readline(limit)) and not rest.endswith(b"\n"):
            pass
        yield None
        if not rest:
            return


def _drain(stream: IO[bytes] | None, tail: deque[str]) -> None:
    if stream is None:
        return
    with contextlib.suppress(OSError, ValueError):
        for raw in bounded_lines(stream, 4096):
            if raw is not None:
                tail.append(raw.decode("utf-8", errors="replace").rstrip())


def _kill(proc: subprocess.Popen[bytes], close_streams: bool = False) -> None:
    """SIGKILL PowerShell's whole group: also what it left running after it exited itself."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=2)
    if not close_streams:
        return  # the reader thread owns the pipes and closes them when it sees EOF
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
