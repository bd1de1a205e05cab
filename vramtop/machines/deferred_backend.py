"""A backend built at its first use, for a console that draws before it reads.

The demo's backend starts (or finds) the simulated machine and loads the supervisor (pydantic,
httpx, psutil) and the simulator: several times the CPU of a minimal Textual app's whole first
frame. The console's first frame needs none of it: only what its header and keys show, known
from the arguments. The build happens at the first read (in the console's reader thread, after
the first frame) or at the first other use.

A build that fails is a reading that fails: a use raises `BackendUnavailable` with the
reason, which the console shows (`reading failed (…)`) instead of a traceback, and offers no
action (there is nothing to act on). It is tried again every `RETRY_S` seconds of use (a
simulated GPU that answered too late on a busy machine, a directory fixed meanwhile). Closed
while a build is under way, it waits for the build and closes what it made: nothing started by
a build outlives the console.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from vramtop import files
from vramtop.core.remedy import RelaunchOrder
from vramtop.machines.interface import CANNOT_ACT, LOG_TAIL, Backend, Frame, ProfileLaunch
from vramtop.outcomes import ActionResult, ProgressCallback

if TYPE_CHECKING:
    from vramtop.session.live import LiveSession

log = logging.getLogger(__name__)

# Seconds between two tries of a build that failed.
RETRY_S = 10.0


class BackendUnavailable(RuntimeError):
    """The backend could not be built; the message says why, for the person."""


class Build:
    """The backend `build` makes at the first use, tried again every `RETRY_S` after a failure
    (`BackendUnavailable` until then), and closed with what it made."""

    def __init__(self, build: Callable[[], Backend], clock: Callable[[], float]) -> None:
        self._build = build
        self._clock = clock
        self.backend: Backend | None = None  # None: not built (yet)
        self.error: str | None = None  # why the last try failed
        self._failed_at = 0.0
        self._closed = False
        self._lock = threading.Lock()

    def built(self) -> Backend:
        """The backend, built now if it was not (BackendUnavailable if it cannot be)."""
        with self._lock:
            if self._closed:
                raise BackendUnavailable("the console is closing")
            due = self.error is None or self._clock() - self._failed_at >= RETRY_S
            if self.backend is None and due:
                try:
                    self.backend = self._build()
                    self.error = None
                except Exception as exc:
                    # A file it may not use (another user's) is said in words with the fix.
                    words = files.problem_words(exc) if isinstance(exc, OSError) else None
                    error = words or str(exc) or type(exc).__name__
                    if error != self.error:  # once per reason, not once per try
                        log.exception("the backend could not be built")
                    self.error, self._failed_at = error, self._clock()
            if self.backend is None:
                raise BackendUnavailable(self.error)
            return self.backend

    def close(self, stop_server: bool) -> None:
        """Closes the backend if it was built (once a build under way is done); one never
        built started nothing to stop, and none is built after this."""
        with self._lock:
            self._closed = True
            if self.backend is not None:
                self.backend.close(stop_server=stop_server)


class DeferredFrames:
    """`FrameSource`, forwarded to the built backend; before the build, what the arguments
    say (and no sample: the first tick builds)."""

    _build: Build
    _demo: bool
    _profile_name: str | None
    _wsl: bool | None
    recorded = False  # a recording is opened before the console, never built after it

    @property
    def demo(self) -> bool:
        built = self._build.backend
        return built.demo if built is not None else self._demo

    @property
    def profile_name(self) -> str | None:
        built = self._build.backend
        return built.profile_name if built is not None else self._profile_name

    @property
    def wsl(self) -> bool | None:
        built = self._build.backend
        return built.wsl if built is not None else self._wsl

    @property
    def finished(self) -> bool:
        built = self._build.backend
        return built.finished if built is not None else False

    @property
    def session(self) -> LiveSession | None:
        built = self._build.backend
        return built.session if built is not None else None

    def tick(self, log_limit: int = LOG_TAIL) -> Frame:
        return self._build.built().tick(log_limit)


class DeferredControl:
    """`ServerControl`, forwarded to the built backend; an action builds it. Before the
    build there is nothing to act on, nor after one that failed."""

    _build: Build
    _can_act: bool
    cannot_act = CANNOT_ACT

    @property
    def can_act(self) -> bool:
        built = self._build.backend
        if built is not None:
            return built.can_act
        return self._can_act and self._build.error is None  # a failed build: nothing to act on

    @property
    def front_door(self) -> str | None:
        built = self._build.backend
        return built.front_door if built is not None else None

    @property
    def launch_budget(self) -> float | None:
        built = self._build.backend
        return built.launch_budget if built is not None else None

    @property
    def profile_launch(self) -> ProfileLaunch | None:
        built = self._build.backend
        return built.profile_launch if built is not None else None

    @property
    def autostart(self) -> bool:
        """Builds the backend (False when it cannot be built: nothing is started). The
        console asks after its first frame, in a worker: never on its event loop."""
        try:
            return self._build.built().autostart
        except BackendUnavailable:
            return False

    def run_housekeeping(self) -> None:
        """The build starts the housekeeping itself (it runs after the first frame)."""
        built = self._build.backend
        if built is not None:
            built.run_housekeeping()

    def start(self, progress: ProgressCallback | None = None) -> ActionResult:
        return self._build.built().start(progress=progress)

    def stop(self, progress: ProgressCallback | None = None) -> ActionResult:
        return self._build.built().stop(progress=progress)

    def restart(
        self, progress: ProgressCallback | None = None, requests_lost: bool = False
    ) -> ActionResult:
        return self._build.built().restart(progress=progress, requests_lost=requests_lost)

    def relaunch(
        self, order: RelaunchOrder, progress: ProgressCallback | None = None
    ) -> ActionResult:
        return self._build.built().relaunch(order, progress)

    def toggle_call(self) -> bool:
        return self._build.built().toggle_call()


class DeferredBackend(DeferredFrames, DeferredControl):
    """A `Backend` that `build` makes at the first use: the console's two parts, each
    forwarded to it (`DeferredFrames`, `DeferredControl`).

    `demo`, `can_act`, `wsl` and `profile_name`: what the console shows until the backend is
    built (or when it cannot be); after that every member is the built backend's."""

    def __init__(
        self,
        build: Callable[[], Backend],
        *,
        demo: bool,
        profile_name: str | None,
        can_act: bool = False,
        wsl: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._build = Build(build, clock)
        self._demo, self._profile_name, self._can_act, self._wsl = demo, profile_name, can_act, wsl

    @property
    def is_built(self) -> bool:
        return self._build.backend is not None

    def close(self, stop_server: bool) -> None:
        """Closes the backend if it was built (see `Build.close`)."""
        self._build.close(stop_server)
