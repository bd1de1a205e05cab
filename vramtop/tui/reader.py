"""The console's reader: one thread, for the console's whole life, that reads when asked.

The timer (and a finished action) asks with `request_tick`; the thread does the blocking
read through the Backend and posts a `SampleArrived` (or a `TickFailed`); the App's handler
only renders. Asks made while a read runs become one read after it: a hanging source never
piles reads up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.dom import DOMNode
from textual.message import Message
from textual.worker import get_current_worker

from vramtop.machines.deferred_backend import BackendUnavailable
from vramtop.machines.interface import LOG_KEPT, LOG_TAIL, FrameSource
from vramtop.tui.messages import SampleArrived, TickFailed

if TYPE_CHECKING:
    from vramtop.machines.headless_runner import Runner

log = logging.getLogger(__name__)

# The reader looks this often whether it was cancelled, should the console end without
# waking it (it is woken on unmount).
READER_CHECK_S = 1.0


class Reader:
    """Reads asked for and answered, counted; the log lines still to be read in full."""

    def __init__(
        self,
        backend: FrameSource,
        post: Callable[[Message], object],
        clock: Callable[[], float],
        *,
        quiet: Callable[[], bool],
    ) -> None:
        """`post`: hands a message to the event loop (from this thread); `quiet`: whether
        the console is quitting (the backend is being closed, and its reads fail by
        design: no failure is logged)."""
        self._backend = backend
        # The runner's tick: the frame, and what opened and closed since the last one (made
        # at the first read: the first frame is drawn before the diagnosis' modules load).
        self._runner: Runner | None = None
        self._post = post
        self._clock = clock
        self._quiet = quiet
        # Reads asked for by the timer (and after actions) and answered by the reader: counted
        # so that an ask made while a read runs gets a read of its own, after it.
        self._asked = 0
        self._answered = 0
        self._wanted = threading.Event()
        self._closing = False
        # Reads of every log line the backend keeps, asked for (the first read, to fill the
        # log panel, and the panel's when a log that does not continue it rebuilds its rows)
        # and made; the asks are written on the event loop, the reads counted by the reader.
        self._kept_asked = 1
        self._kept_read = 0
        self._failure: str | None = None  # the last read's failure, if any

    def start(self, node: DOMNode) -> None:
        """Run the reader in a thread worker of `node` (the App), group "tick"."""
        node.run_worker(
            self._reader,
            name="_reader",
            group="tick",
            description="_reader()",
            exclusive=True,
            exit_on_error=False,
            thread=True,
        )

    def request_tick(self) -> int:
        """Ask for a read; returns the ask's number (the read that answers it says so)."""
        self._asked += 1
        self._wanted.set()
        return self._asked

    @property
    def asked(self) -> int:
        """The reads asked for so far (the console's first is its first frame's own)."""
        return self._asked

    @property
    def reads_pending(self) -> bool:
        """A read was asked for and its sample has not been shown yet."""
        return self._answered < self._asked

    def answered(self, answers: int) -> None:
        """The asks up to `answers` have been shown (the handler of the read's message)."""
        self._answered = max(self._answered, answers)

    def want_kept_lines(self) -> None:
        """The next read brings every log line the backend keeps (not one now: reads keep
        their pace)."""
        self._kept_asked += 1

    def close(self) -> None:
        self._closing = True
        self._wanted.set()  # wake the reader so that it ends now

    def _reader(self) -> None:
        """Reads when asked, for the console's whole life.

        One thread worker, woken through an Event. A worker started for each tick (a Worker,
        a task and an executor future, and three state messages handled on the event loop)
        cost the event loop about 0.6 ms a second: a tenth of the demo's CPU
        (bench/bench_console.py)."""
        worker = get_current_worker()
        wanted = self._wanted
        while not (self._closing or worker.is_cancelled):
            if not wanted.wait(READER_CHECK_S):
                continue
            wanted.clear()
            if self._closing:
                return
            # Every ask made up to here is answered by this read; a later one sets `wanted`
            # again and gets the next.
            self.read(self._asked)

    def read(self, answers: int) -> None:
        """One read, its frame posted as a `SampleArrived` answering the asks up to
        `answers` (on the reader's thread; a bench calls it on the event loop)."""
        kept_asked = self._kept_asked
        # Every line the backend keeps when asked, else the tail that continues the panel.
        limit = LOG_KEPT if kept_asked != self._kept_read else LOG_TAIL
        try:
            if self._runner is None:
                from vramtop.machines.headless_runner import Runner

                self._runner = Runner(self._backend, interval_s=READER_CHECK_S)
            news = self._runner.tick(limit)
            frame = news.frame
            # Where the normal rate came from ('remembered 2 h ago', 'learned now', or that
            # none is known yet), as the frame's throughput view says it.
            origin = frame.throughput.origin if frame.throughput is not None else None
        except Exception as error:  # a backend bug must not take the console down
            reason = str(error) if isinstance(error, BackendUnavailable) else None
            reason = reason or f"{type(error).__name__}: {error}"
            # Once per reason, not once a second; none while quitting.
            if reason != self._failure and not self._quiet():
                log.exception("tick failed")
            self._failure = reason
            self._post(TickFailed(reason, answers=answers))
            return
        self._failure = None
        self._kept_read = kept_asked
        # Everything goes back in the message: the console's state is written on the event
        # loop only, never from this thread while a dialog may be reading it.
        kept = limit == LOG_KEPT or len(frame.log_lines) < limit  # fewer came: all there is
        self._post(
            SampleArrived(
                frame,
                normal_origin=origin,
                answers=answers,
                log_kept=kept,
                opened=news.opened,
                closed=news.closed,
            )
        )
