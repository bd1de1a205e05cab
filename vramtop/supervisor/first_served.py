"""A step's last phase, the first request served after its release, for its timeline.

A step's event is written at ready: its report never waits for the agent's next request. The
vramtop that made the step then looks at the front door's report until the door says how
long after its release it answered a request whole (`first_served_s`), and adds to the
timeline a `first_served` event tied to the step (`step`: its kind, `step_t`: its event's
time), which `core.step_report.last_step` reads back into the step's phases. A new step, or
the watch's limit (the door's hold), ends the look unwritten; so does the end of the process
(a command that exits at ready leaves the door's own report, which `status --json` adds).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from vramtop.core.server_events import EventName
from vramtop.event_log import EventLog
from vramtop.supervisor import door
from vramtop.supervisor.state import Lifecycle, ServerRecord

log = logging.getLogger(__name__)

LOOK_EVERY_S = 0.5  # one loopback request to the door; the agent's answers take longer


class FirstServedWatch:
    """The look at the door after each step of one profile's server: `watch` after its event
    is written, `cancel` when another step begins (its release would be that step's)."""

    def __init__(
        self,
        profile: str,
        record: Callable[[], ServerRecord | None],
        watch_s: Callable[[], float],
        look_every_s: float = LOOK_EVERY_S,
    ) -> None:
        self._profile = profile
        self._record = record
        self._watch_s = watch_s
        self._look_every_s = look_every_s
        self._ended = threading.Event()

    def watch(self, step: str, step_t: float) -> None:
        """Look at the door for the first request served after the release of the step
        whose event (`step`, written at `step_t`) just came, on a thread of its own."""
        self.cancel()
        ended = self._ended = threading.Event()
        threading.Thread(
            target=self._look,
            args=(step, step_t, ended),
            name=f"first-served-{self._profile}",
            daemon=True,
        ).start()

    def cancel(self) -> None:
        self._ended.set()

    def _look(self, step: str, step_t: float, ended: threading.Event) -> None:
        deadline = time.monotonic() + self._watch_s()
        while time.monotonic() < deadline and not ended.is_set():
            rec = self._record()
            if rec is None or rec.front_door is None or rec.state != Lifecycle.RUNNING:
                return  # (stopped, crashed: nothing will be served after this release)
            report = door.info(rec) or {}
            served = report.get("first_served_s")
            if isinstance(served, int | float) and not isinstance(served, bool):
                if not ended.is_set():
                    detail = {"step": step, "step_t": step_t, "first_served_s": served}
                    EventLog.for_profile(self._profile).append(
                        time.time(), EventName.FIRST_SERVED, detail
                    )
                return
            ended.wait(self._look_every_s)
