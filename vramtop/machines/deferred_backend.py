"""A backend built at its first use, for a console that draws before it reads.

The demo's backend starts (or finds) the simulated machine and loads the supervisor (pydantic,
httpx, psutil) and the simulator: several times the CPU of a minimal Textual app's whole first
frame. The console's first frame needs none of it: only what its header and keys show, known
from the arguments. The build happens at the first read (in the console's reader thread, after
the first frame) or at the first other use.

A build that fails is a reading that fails: every later use raises `BackendUnavailable` with
the reason, which the console shows (`reading failed (…)`) instead of a traceback.
"""

from __future__ import annotations

import argparse
import logging
import threading
from collections.abc import Callable
from typing import Any

from vramtop.core.model import Sample
from vramtop.machines.interface import ActionResult, Backend, ProgressCallback

log = logging.getLogger(__name__)


class BackendUnavailable(RuntimeError):
    """The backend could not be built; the message says why, for the person."""


class DeferredBackend:
    """A `Backend` (and its console extras) that `build` makes at the first use.

    `known`: attributes the console reads before then, with the values they have until the
    backend is built (e.g. `demo=True`); after that every attribute is the built backend's."""

    def __init__(self, build: Callable[[], Backend], **known: Any) -> None:
        self._build = build
        self._known = known
        self._backend: Backend | None = None
        self._error: str | None = None
        self._lock = threading.Lock()

    @property
    def is_built(self) -> bool:
        return self._backend is not None

    def built(self) -> Backend:
        """The backend, built now if it was not (BackendUnavailable if it cannot be)."""
        with self._lock:
            if self._backend is None and self._error is None:
                try:
                    self._backend = self._build()
                except Exception as exc:
                    log.exception("the backend could not be built")
                    self._error = str(exc) or type(exc).__name__
            if self._backend is None:
                raise BackendUnavailable(self._error)
            return self._backend

    def __getattr__(self, name: str) -> Any:
        # Only for what is not defined here: the console extras (findings, events, …).
        if name.startswith("_"):
            raise AttributeError(name)
        if self._backend is None and name in self._known:
            return self._known[name]
        try:
            return getattr(self.built(), name)
        except BackendUnavailable:
            if name in self._known:
                return self._known[name]
            raise AttributeError(name) from None

    # -- the Backend protocol -----------------------------------------------------------------
    @property
    def demo(self) -> bool:
        return bool(self.__getattr__("demo"))

    @demo.setter
    def demo(self, value: bool) -> None:  # (the protocol's attribute is settable)
        self._known["demo"] = value

    @property
    def profile_name(self) -> str | None:
        name = self.__getattr__("profile_name")
        return None if name is None else str(name)

    @profile_name.setter
    def profile_name(self, value: str | None) -> None:
        self._known["profile_name"] = value

    def tick(self) -> Sample:
        return self.built().tick()

    def start(self, progress: ProgressCallback | None = None) -> ActionResult:
        return self.built().start(progress=progress)

    def stop(self, progress: ProgressCallback | None = None) -> ActionResult:
        return self.built().stop(progress=progress)

    def restart(
        self, progress: ProgressCallback | None = None, requests_lost: bool = False
    ) -> ActionResult:
        return self.built().restart(progress=progress, requests_lost=requests_lost)

    def relaunch(
        self,
        gpu_memory_utilization: float | None = None,
        max_model_len: int | None = None,
        kv_cache_dtype: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> ActionResult:
        return self.built().relaunch(
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            kv_cache_dtype=kv_cache_dtype,
            progress=progress,
        )

    def log_lines(self, limit: int = 500) -> list[str]:
        return self.built().log_lines(limit)

    def toggle_call(self) -> bool:
        return self.built().toggle_call()

    def close(self, stop_server: bool) -> None:
        """Closes the backend if it was built; one never built started nothing to stop."""
        if self._backend is not None:
            self._backend.close(stop_server=stop_server)


def console_backend(args: argparse.Namespace) -> DeferredBackend:
    """The console's backend for `--demo` or `--url` (see commands/common.py's `backend_for`),
    built after the first frame; until then it is the simulated machine or a URL watched,
    with no sample yet."""

    def build() -> Backend:
        from vramtop.commands.common import backend_for
        from vramtop.commands.errors import CommandError

        try:
            backend = backend_for(args)[0]
        except CommandError as exc:
            raise BackendUnavailable(str(exc)) from exc
        # Crash settling and automatic restarts on a thread of their own: a tick only reads.
        backend.keep_house()
        return backend

    demo = bool(args.demo)
    return DeferredBackend(
        build,
        demo=demo,
        can_act=demo,  # watching a URL; a profile serving it is found at the build
        profile_name=None,
        wsl=bool(args.wsl) if demo else None,
        call_on=False,
    )
