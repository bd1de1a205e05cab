"""What the console (and the headless commands) need from the machine, as one interface.

Two implementations: the real machine (NVML + a supervised or attached vLLM) and the simulated
machine (`--demo`). Every method may block: the console calls them from thread workers, never
on the event loop. Methods never raise for outside-world failures; they report them in the
returned values (`Sample`, `ActionResult`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from vramtop.core.events import Event
from vramtop.core.findings import Finding
from vramtop.core.headroom.terms import HeadroomInputs
from vramtop.core.model import Rates, Sample
from vramtop.core.normal_rate import NormalRate

# Progress of a long action, in the user's words: "stopping", "memory released", "loading",
# "profiling", "capturing graphs", "ready", "failed".
ProgressCallback = Callable[[str], None]


@dataclass(frozen=True)
class ActionResult:
    ok: bool
    message: str  # one sentence for the status bar / CLI
    detail: str | None = None  # e.g. the startup failure vLLM printed


class Backend(Protocol):
    demo: bool
    profile_name: str | None

    def tick(self) -> Sample:
        """Read every source once and return the new sample (also appended to the timeline)."""
        ...

    def start(self, progress: ProgressCallback | None = None) -> ActionResult: ...

    def stop(self, progress: ProgressCallback | None = None) -> ActionResult: ...

    def restart(
        self, progress: ProgressCallback | None = None, requests_lost: bool = False
    ) -> ActionResult:
        """`requests_lost`: the person confirmed a restart with requests running."""
        ...

    def relaunch(
        self,
        gpu_memory_utilization: float | None = None,
        max_model_len: int | None = None,
        kv_cache_dtype: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> ActionResult: ...

    def log_lines(self, limit: int = 500) -> list[str]:
        """The tail of the server's log (newest last)."""
        ...

    def toggle_call(self) -> bool:
        """Demo only: start or end a simulated video call; returns whether a call is now on.
        Raises when the simulated machine cannot be asked (the console says so)."""
        ...

    def close(self, stop_server: bool) -> None:
        """Leave: stop the server only when asked (the default is to leave it running)."""
        ...


class ConsoleExtras(Protocol):
    """What a backend may also offer the console; every member is optional.

    The console reads these with `getattr` and shows less when one is missing, so a backend
    can grow into them one at a time.
    """

    wsl: bool | None  # None: not known
    call_on: bool  # demo: a simulated video call is on

    def findings(self) -> list[Finding]:
        """Open findings."""
        ...

    def events(self) -> list[Event]:
        """The session's events, oldest first."""
        ...

    def healthy_baseline(self) -> Rates | None:
        """The healthy token rates learned for the current server start."""
        ...

    def normal_rate(self) -> NormalRate | None:
        """The normal decode speed compared with now, and where it came from (learned on
        this run, or remembered from an earlier one and when)."""
        ...

    def headroom_inputs(self) -> HeadroomInputs | None:
        """The live server's terms for the headroom calculator (calibrated), if known."""
        ...
