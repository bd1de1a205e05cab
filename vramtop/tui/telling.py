"""What the console tells beyond its own screen: the terminal's taskbar state and
notification (OSC 9;4 and OSC 777) when a finding opens and closes, and the findings in the
profile's event log; and, for its `e` timeline, the events of earlier runs.

Only the one process that acts for the profile tells (`console_may_notify`, the profile's
actor lock): when a guard runs, it notifies and writes the event log, and the console tells
nothing; a person's keys in it still act (the guard sees them in the event log and says so).
The guard has precedence: a console that holds the actor lock checks at each tick whether a
guard holds the profile's guard lock, and if so lets the actor lock go at once (the guard
waits for it) and says so once; when that guard has gone, the console takes the actor lock
again at its next tick, and says that too. A recording played back
tells nothing: its findings are not happening now. The sequences go through Textual's own
driver, the one writer of the terminal while the console runs (as Textual's
`copy_to_clipboard` writes its OSC 52), so they never land in the middle of a frame.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from vramtop.core.findings import Finding
from vramtop.core.news import finding_closed, finding_opened
from vramtop.core.server_events import Event
from vramtop.machines.interface import Backend
from vramtop.notify.terminal import TerminalSender
from vramtop.session.finding_events import CONSOLE_TOLD, EventLog, before_and_since, record_findings

if TYPE_CHECKING:
    # Loaded where there is a profile to act for (its supervisor brings psutil): a console
    # watching a URL needs none.
    from vramtop.supervisor.actor import ActorLock

log = logging.getLogger(__name__)

# The status line once a guard acts for the profile (it tells and acts on its own, and a
# person's keys here still act: the guard gives way to them), and once it has gone. Short
# enough to be whole beside the header at 80 columns.
GUARD_WATCHES = "a guard watches; your keys still act"
GUARD_LEFT = "the guard has left: this console acts again"


def console_may_notify(backend: Backend, lock: ActorLock | None) -> bool:
    """Whether this console acts for its profile: notifies and writes the findings to its
    event log. Not when the backend replays a recording, nor while another process (a
    guard, another console) holds the profile's actor lock: the console takes the lock when
    it is free (`lock`: None where there is no profile to hold one for, a watched URL)."""
    if backend.recorded:
        return False
    try:
        # Once, never waiting: this runs on the event loop each tick, and the next tries again.
        return lock is None or lock.try_acquire(tries=1)
    except OSError:  # (its file unusable: no guard could hold it either)
        log.warning("the profile's actor lock cannot be used", exc_info=True)
        return True


class ConsoleTelling:
    """Fed the open findings of each frame shown; tells what opened and closed since."""

    def __init__(
        self,
        backend: Backend,
        write: Callable[[str], None],
        *,
        may_notify: Callable[[Backend, ActorLock | None], bool] = console_may_notify,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._backend = backend
        self._terminal = TerminalSender(write)
        self._may_notify = may_notify
        self._clock = clock
        self.opened_at = clock()  # events before this are a previous run's
        self._actor: ActorLock | None = None
        self._guard_pid: object = None  # the guard acting for the profile, while one does
        self._said: list[str] = []  # for the status line, taken by `take_said`
        self.acting = self._act_now()  # the lock taken now when free

    def _act_now(self) -> bool:
        """Whether this console acts for its profile at this tick: never while a guard holds
        the guard lock (the actor lock let go at once for it), else `may_notify`."""
        lock = self._actor_lock()
        if lock is not None and self._guard_acts(lock):
            self.acting = False
            return False
        self.acting = self._may_notify(self._backend, lock)
        if self.acting and self._guard_pid is not None:
            self._said.append(GUARD_LEFT)
            self._guard_pid = None
        return self.acting

    def _guard_acts(self, lock: ActorLock) -> bool:
        from vramtop.supervisor.actor import guard_holder

        try:
            guard = guard_holder(lock.profile)
        except OSError:
            return False
        if guard is None:
            return False
        lock.release()  # the guard, holding the guard lock, waits for it
        pid = guard.get("pid")  # None for an instant: the guard writing or letting go of it
        if pid is not None and pid != self._guard_pid:
            self._guard_pid = pid
            self._said.append(GUARD_WATCHES)
        return True

    def take_said(self) -> list[str]:
        """What the status line should say of who acts, once each (a guard took over, or
        left)."""
        said, self._said = self._said, []
        return said

    def _actor_lock(self) -> ActorLock | None:
        name = self._backend.profile_name
        if not name or not self._backend.can_act or self._backend.recorded:
            return None
        if self._actor is None or self._actor.profile != name:
            from vramtop.supervisor.actor import CONSOLE, ActorLock

            self._actor = ActorLock(name, CONSOLE)
        return self._actor

    def close(self) -> None:
        """Let the actor lock go (the process's exit does too)."""
        if self._actor is not None:
            self._actor.release()

    def _log(self) -> EventLog | None:
        """The profile's event log, where this console acts on a profile (asked each time: a
        backend built after the first frame learns its profile then)."""
        name = self._backend.profile_name
        return EventLog.for_profile(name) if name and self._backend.can_act else None

    def findings_changed(self, opened: Sequence[Finding], closed: Sequence[Finding]) -> None:
        """What opened and closed since the frame shown before (the runner's step says)."""
        try:
            # Each tick, findings or none: a guard started beside the console waits for it.
            if not self._act_now() or not (opened or closed):
                return  # a guard acts for the profile: it tells, the console does not
            for finding in closed:
                self._terminal.send(finding_closed(finding))
            for finding in opened:
                self._terminal.send(finding_opened(finding))
            event_log = self._log()
            if event_log is not None:
                record_findings(event_log, self._clock(), opened, closed, told_by=CONSOLE_TOLD)
        except Exception:  # telling must never take the console down
            log.exception("telling the findings failed")

    def actor(self) -> str | None:
        """While another process acts for the profile (a guard), what it is ("guard"); None
        while this console acts (it takes the lock once it is free) or has no profile. On the
        event loop: it takes or lets go of the actor lock as each tick does."""
        lock = self._actor_lock()
        if self._log() is None or lock is None:
            return None
        try:
            if self._act_now():
                return None
            holder = lock.holder()
        except Exception:
            log.exception("asking who acts for the profile failed")
            return None
        return (holder["kind"] if holder else None) or "another vramtop"

    def lasting(self, actor: str | None) -> tuple[list[Event], list[Event]]:
        """The profile's event log, read once (two files of up to 5 MB each: off the
        event loop): the events from before this console opened (its earlier runs, a
        guard's, a command's), and, while `actor` acts for the profile, what it has written
        since (its findings and decisions, the actions it asked for), which this console's
        own session does not hold. Oldest first, the last 500 of each; none without a
        profile."""
        event_log = self._log()
        if event_log is None:
            return [], []
        try:
            events = event_log.read()
        except Exception:
            log.exception("reading the event log failed")
            return [], []
        earlier, acted = before_and_since(events, self.opened_at)
        return earlier, acted if actor else []
