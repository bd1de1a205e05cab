"""The Notifier: one news to every sender, the same news never twice in a row, and never a
wait on a sender: `send` hands the news to each sender's own thread, where it runs with a
timeout of its own (a hung PowerShell or `--on-finding` command is killed there, with what it
started). So the guard's and the console's ticks never wait on a notification, and the
senders never wait on each other: a toast that hangs does not hold up notify-send. Each
sender gets the news in the order they came.

A sender that cannot send says why once per reason ("cannot notify: …", logged and handed to
`on_problem`), never raises, and is asked again for the next news (interop may come back).
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence

from vramtop.core.news import News
from vramtop.notify.sending import Sender, SendFailed

log = logging.getLogger(__name__)

# How long `close` waits for the news already handed over.
CLOSE_WAIT_S = 2.0


class Notifier:
    def __init__(
        self,
        senders: Sequence[Sender],
        *,
        on_problem: Callable[[str], None] | None = None,
        dropped: Sequence[str] = (),
        hint: str | None = None,
    ) -> None:
        """`dropped`: why each sender that was left out cannot work here ("no terminal on
        stdout"); `hint`: what to give when no sender is left."""
        self.senders = tuple(senders)
        self.dropped = tuple(dropped)
        self._hint = hint
        self._on_problem = on_problem
        self._last_key: str | None = None
        self._said: set[str] = set()
        self._lanes = [_Lane(sender, self._send_one) for sender in self.senders]
        self._lock = threading.Lock()
        self._said_lock = threading.Lock()
        self._started = False
        self.sent = 0  # news handed to the senders (after dedup)
        self.problems: list[str] = []  # each "cannot notify: …" once

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.senders]

    @property
    def reach(self) -> str:
        """Who the news reaches, in words for the guard's start line: "toast, terminal";
        "toast (left out: no terminal on stdout)"; "nobody: no terminal on stdout,
        notify-send not found; give --on-finding CMD"."""
        names = ", ".join(self.names)
        dropped = ", ".join(self.dropped)
        if names:
            return f"{names} (left out: {dropped})" if dropped else names
        words = f"nobody: {dropped}" if dropped else "nobody"
        return f"{words}; {self._hint}" if self._hint else words

    def send(self, news: News) -> bool:
        """Hand `news` over; False when it is the news sent just before (dropped). Never
        raises, never blocks."""
        try:
            with self._lock:
                if news.key == self._last_key:
                    return False
                self._last_key = news.key
                if not self.senders:
                    return True
                self.sent += 1
                if not self._started:
                    self._started = True
                    for lane in self._lanes:
                        lane.start()
                for lane in self._lanes:  # (under the lock: every sender in the same order)
                    lane.queue.put(news)
            return True
        except Exception:  # a notification must never take the guard or the console down
            log.exception("notifying failed")
            return False

    def flush(self, timeout_s: float = CLOSE_WAIT_S) -> bool:
        """Wait until every news handed over has been through every sender (tests, and
        `close`); False when that took longer than `timeout_s`."""
        with self._lock:
            if not self._started:
                return True
        marks = [_Marker(threading.Event()) for _ in self._lanes]
        for lane, mark in zip(self._lanes, marks, strict=True):
            lane.queue.put(mark)
        deadline = time.monotonic() + timeout_s
        return all(m.done.wait(max(0.0, deadline - time.monotonic())) for m in marks)

    def close(self, timeout_s: float = CLOSE_WAIT_S) -> None:
        self.flush(timeout_s)

    def _send_one(self, sender: Sender, news: News) -> None:
        try:
            sender.send(news)
        except SendFailed as exc:
            self._problem(f"cannot notify: {sender.name}: {exc}")
        except Exception as exc:
            log.exception("the %s sender failed", sender.name)
            self._problem(f"cannot notify: {sender.name}: {type(exc).__name__}: {exc}")

    def _problem(self, text: str) -> None:
        with self._said_lock:  # (each sender's thread)
            if text in self._said:
                return
            self._said.add(text)
            self.problems.append(text)
        log.warning("%s", text)
        if self._on_problem is not None:
            try:
                self._on_problem(text)
            except Exception:
                log.exception("reporting a notification problem failed")


class _Marker:
    def __init__(self, done: threading.Event) -> None:
        self.done = done


class _Lane:
    """One sender's thread and the news waiting for it."""

    def __init__(self, sender: Sender, send_one: Callable[[Sender, News], None]) -> None:
        self.sender = sender
        self.queue: queue.Queue[News | _Marker] = queue.Queue()
        self._send_one = send_one
        self._thread = threading.Thread(
            target=self._run, name=f"notifier-{sender.name}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if isinstance(item, _Marker):
                item.done.set()
            else:
                self._send_one(self.sender, item)


def stdout_writer() -> Callable[[str], None] | None:
    """Writes to the process's own stdout when that is a terminal (None otherwise: a guard
    under systemd has no terminal to signal)."""
    out = sys.__stdout__
    if out is None or not out.isatty():
        return None

    def write(text: str) -> None:
        out.write(text)
        out.flush()

    return write
