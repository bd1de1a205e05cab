"""Request bodies: which the door keeps in memory, and how the others go through.

A body the door keeps is read whole before the request goes on, so that a request vLLM
dropped during a restart can be sent again to the new server. What the kept bodies take
together is bounded (`BodyBudget`): a body is kept only when its declared length fits in
what is left. Every other body streams: forwarded as it arrives, chunk by chunk, and while
its request is held it waits unread in the client's connection (TCP holds the client back),
so the door's memory does not grow with it. A streamed body that went out can not be sent
again: when vLLM drops it, its client gets the 502.

One body over the per-request limit is refused whole with a 413 (its declared length), or,
sent without one (chunked), once its count passes the limit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import StreamReader, web

from vramtop.frontdoor import protocol
from vramtop.frontdoor.gate import Refusal


class BodyBudget:
    """The bytes of request bodies the door keeps in memory now, all requests together."""

    def __init__(self, total_bytes: int) -> None:
        self.total_bytes = total_bytes
        self.kept_bytes = 0

    def reserve(self, size: int) -> bool:
        if self.kept_bytes + size > self.total_bytes:
            return False
        self.kept_bytes += size
        return True

    def give_back(self, size: int) -> None:
        self.kept_bytes -= size


class ClientLeft(Exception):
    """The client closed its connection before sending its whole body."""


class Body:
    """One request's body: kept whole (`kept`), or to be streamed from the connection."""

    def __init__(
        self,
        request: web.Request,
        limit_bytes: int,
        kept: bytearray | None,
        budget: BodyBudget | None = None,
    ) -> None:
        self._request = request
        self._limit_bytes = limit_bytes
        self._budget = budget
        self.kept = kept
        self.length = request.content_length
        self.sent_bytes = 0  # of a streamed body: taken from the connection and sent on
        self.too_large = False

    @property
    def resendable(self) -> bool:
        """Whether the request can still be sent (again) whole."""
        return self.kept is not None or self.sent_bytes == 0

    @property
    def kept_whole(self) -> bool:
        """Whether the body is in memory, to be sent again after it went out."""
        return self.kept is not None

    def data(self) -> bytearray | AsyncIterator[bytes] | None:
        if self.kept is not None:
            return self.kept or None
        return self._stream()

    def headers(self) -> dict[str, str]:
        """The length header a streamed body is sent with (a kept one's is computed)."""
        if self.kept is None and self.length is not None:
            return {"Content-Length": str(self.length)}
        return {}

    def release(self) -> None:
        if self._budget is not None and self.kept is not None:
            self._budget.give_back(len(self.kept))
            self._budget = None
        self.kept = None

    async def _stream(self) -> AsyncIterator[bytes]:
        content = self._request.content
        while chunk := await _read(content):
            self.sent_bytes += len(chunk)
            if self.sent_bytes > self._limit_bytes:
                self.too_large = True
                raise ClientLeft("the body passed the limit")  # the upstream request ends here
            yield chunk
        if self.length is not None and self.sent_bytes < self.length:
            # Its length promised more: ending here would leave vLLM waiting for the rest.
            raise ClientLeft("the client left before sending its whole body")


async def _read(content: StreamReader) -> bytes:
    """The next bytes the client sent; none once it has left."""
    try:
        return await content.readany()
    except ConnectionResetError:
        return b""


def too_large(limit_bytes: int) -> Refusal:
    return Refusal(413, protocol.body_too_large(limit_bytes), None)


async def receive(request: web.Request, budget: BodyBudget, limit_bytes: int) -> Body:
    """The request's body, kept when it fits in `budget`, else to be streamed. Raises
    `Refusal` (413) for a declared length over `limit_bytes`, `ClientLeft` when the client
    leaves during a kept body."""
    length = request.content_length
    if length is not None and length > limit_bytes:
        raise too_large(limit_bytes)
    if not request.body_exists:
        return Body(request, limit_bytes, bytearray())
    if length is None or not budget.reserve(length):
        return Body(request, limit_bytes, None)
    # Read into one buffer of the declared size: no copies on the way (aiohttp's `read()`
    # grows a buffer, then copies it whole).
    buffer = bytearray(length)
    body = Body(request, limit_bytes, buffer, budget)
    view = memoryview(buffer)
    got = 0
    try:
        while got < length:
            try:
                chunk = await request.content.readany()
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise ClientLeft("the client left before sending its whole body")
            view[got : got + len(chunk)] = chunk
            got += len(chunk)
    except BaseException:
        view.release()
        body.release()
        raise
    view.release()
    return body
