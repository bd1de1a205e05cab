"""Which requests go through and when: the door's holding, its queue and its counters.

One `Gate` per door, used from its event loop only. A request asks `admit()` for the upstream
to forward to; while the door holds, it waits in arrival order until a release (forwarded),
a fail or its hold time (an error answer). A request sent again after a hold recalled it
(`proxy.Forwarder.recall`) keeps its place by its first arrival. What the door answers itself
is a `Refusal`. The `Gate` decides and counts; the waiting requests themselves, in order, are
its `HeldQueue`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from vramtop.core.json_types import JsonObject
from vramtop.frontdoor import protocol


class Refusal(Exception):
    """An answer the door gives instead of forwarding: status, JSON body (OpenAI's error
    shape, `protocol.error_body`), Retry-After."""

    def __init__(self, status: int, body: JsonObject, retry_after_s: int | None) -> None:
        super().__init__(status, body)
        self.status = status
        self.body = body
        self.retry_after_s = retry_after_s


@dataclass(eq=False)
class _Held:
    arrived: float
    future: asyncio.Future[str] = field(repr=False)


class HeldQueue:
    """The requests the door holds, in order of first arrival: each waits on its future until
    it is let through to an upstream or refused."""

    def __init__(self) -> None:
        self._queue: deque[_Held] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def longest_wait(self, now: float) -> float:
        """How long the request waiting longest has waited (0 with none waiting)."""
        return max((now - h.arrived for h in self._queue), default=0.0)

    def add(self, held: _Held) -> None:
        """Into the queue by arrival: a request sent again goes before those that came after
        it, whatever the order its recall ended in."""
        at = len(self._queue)
        while at > 0 and self._queue[at - 1].arrived > held.arrived:
            at -= 1
        self._queue.insert(at, held)

    def forget(self, held: _Held) -> None:
        """A request that stopped waiting (timed out, or its client went)."""
        with contextlib.suppress(ValueError):
            self._queue.remove(held)

    def let_through(self, upstream: str) -> int:
        """Every waiting request sent on to `upstream`, in arrival order; how many."""
        return self._settle_all(lambda held: held.future.set_result(upstream))

    def refuse_all(self, body: Callable[[], JsonObject]) -> int:
        """Every waiting request answered with the door's 503 (`body`); how many."""
        return self._settle_all(
            lambda held: held.future.set_exception(Refusal(503, body(), protocol.RETRY_AFTER_S))
        )

    def _settle_all(self, settle: Callable[[_Held], None]) -> int:
        count = 0
        while self._queue:
            held = self._queue.popleft()
            if not held.future.done():
                settle(held)
                count += 1
        return count


class Gate:
    def __init__(
        self,
        upstream: str | None,
        hold_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.upstream = upstream
        self.hold_s = hold_s
        self.clock = clock
        # Without an upstream there is nothing to forward to: the door holds until a release.
        self.holding = upstream is None
        self.stopping = False
        self.in_flight = 0
        self.served = 0
        self.failed = 0
        self.abandoned = 0
        self.held_total = 0
        self.replayed = 0  # requests a hold cancelled upstream, to be sent again
        self.longest_hold_s = 0.0
        # When the last release was, and how long after it the first request was answered
        # whole (None: not yet): a step's last phase, as the agent sees it.
        self.released_at: float | None = None
        self.first_served_s: float | None = None
        self._queue = HeldQueue()
        self._idle = asyncio.Event()
        self._idle.set()

    # -- what the door's status says ------------------------------------------------------------
    @property
    def held(self) -> int:
        return len(self._queue)

    def longest_hold_now(self) -> float:
        """The longest any request has waited, the ones waiting now included."""
        return max(self.longest_hold_s, self._queue.longest_wait(self.clock()))

    # -- a request's way through ----------------------------------------------------------------
    async def admit(self, arrived: float | None = None) -> str:
        """The upstream to forward to, once the door lets the request through; counted in
        flight until `finished`. Raises `Refusal` for a held request that timed out or was
        failed. `arrived` keeps a re-held request's place in time."""
        if self.stopping:
            raise Refusal(503, protocol.door_stopping(), protocol.RETRY_AFTER_S)
        if not self.holding and self.upstream is not None:
            self._start()
            return self.upstream
        held = _Held(self.clock() if arrived is None else arrived, self.loop().create_future())
        self._queue.add(held)
        self.held_total += 1
        remaining = max(0.0, self.hold_s - (self.clock() - held.arrived))
        try:
            upstream = await asyncio.wait_for(asyncio.shield(held.future), remaining)
        except TimeoutError:
            self._queue.forget(held)
            raise Refusal(
                503, protocol.held_too_long(self.hold_s), protocol.RETRY_AFTER_S
            ) from None
        except asyncio.CancelledError:
            self._queue.forget(held)
            raise
        finally:
            self.longest_hold_s = max(self.longest_hold_s, self.clock() - held.arrived)
        self._start()
        return upstream

    def finished(self, ok: bool) -> None:
        """A request the door forwarded has ended (`ok`: answered whole by the upstream)."""
        self.in_flight -= 1
        if ok:
            self.served += 1
            if self.released_at is not None and self.first_served_s is None:
                self.first_served_s = self.clock() - self.released_at
        if self.in_flight == 0:
            self._idle.set()

    def refused(self) -> None:
        """The door answered a request with an error of its own, or a stream broke."""
        self.failed += 1

    # -- the supervisor's calls -----------------------------------------------------------------
    async def hold(self, drain_s: float) -> bool:
        """Hold new requests from now on; True once none is in flight, False after `drain_s`."""
        self.start_holding()
        return await self.drain(drain_s)

    def start_holding(self) -> None:
        """New requests wait from now on."""
        self.holding = True

    async def drain(self, drain_s: float) -> bool:
        """True once no request is in flight, False after `drain_s`."""
        if self.in_flight == 0:
            return True
        try:
            await asyncio.wait_for(self._idle.wait(), max(0.0, drain_s))
        except TimeoutError:
            return False
        return True

    def release(self, upstream: str | None) -> int:
        """Forward the held requests, in arrival order, and the new ones, to `upstream` (or
        the current one). Returns how many were held."""
        if upstream is not None:
            self.upstream = upstream
        if self.upstream is None:
            raise ValueError("the door has no upstream yet: release needs one")
        self.holding = False
        self.released_at, self.first_served_s = self.clock(), None
        return self._queue.let_through(self.upstream)

    def fail(self, reason: str) -> int:
        """Answer every held request with the 503 at once; holding ends."""
        self.holding = self.upstream is None
        return self._queue.refuse_all(lambda: protocol.not_serving(reason))

    def stop(self) -> int:
        """The door is stopping: the held requests are answered rather than dropped, and so
        is any request that would wait from now on (one vLLM dropped, one on a connection
        kept open)."""
        self.holding = True
        self.stopping = True
        return self._queue.refuse_all(protocol.door_stopping)

    # -- inside ---------------------------------------------------------------------------------
    def loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def _start(self) -> None:
        self.in_flight += 1
        self._idle.clear()
