"""Forwarding one request to vLLM: headers and body through, the answer streamed back chunk by
chunk as it arrives (`iter_any`), never re-encoded nor gathered whole.

The request's body is kept whole while the door's body budget allows (an OpenAI request is
JSON, small beside what it asks for), so a request vLLM drops during a restart is sent again
to the new server; a body past the budget streams through (`bodies.py`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import deque
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from vramtop.core.door_stats import WINDOW, RequestTiming, SseTally
from vramtop.frontdoor import protocol
from vramtop.frontdoor.bodies import Body, BodyBudget, ClientLeft, receive, too_large
from vramtop.frontdoor.gate import Gate, Refusal

# Headers aiohttp's client would add on its own; the door sends only what the client sent.
SKIP_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
# Request headers the door does not pass on as they came: the connection's own, the Host
# (the upstream's is sent), the length (the same number, set again with the body) and an
# Expect (the door answered it: the client sends its body to the door).
_DROPPED_REQUEST = protocol.HOP_BY_HOP | {"host", "content-length", "expect"}
_DROPPED_RESPONSE = protocol.HOP_BY_HOP | {"content-length"}


def _passed(headers: Any, dropped: frozenset[str] | set[str]) -> CIMultiDict[str]:
    named = {
        word.strip().lower()
        for value in headers.getall("Connection", [])
        for word in value.split(",")
    }
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        low = name.lower()
        if low not in dropped and low not in named:
            out.add(name, value)
    return out


def refusal_response(refusal: Refusal) -> web.Response:
    headers = {}
    if refusal.retry_after_s is not None:
        headers["Retry-After"] = str(refusal.retry_after_s)
    return web.Response(
        status=refusal.status,
        body=json.dumps(refusal.body).encode(),
        content_type="application/json",
        headers=headers,
    )


def _measured(request: web.Request) -> bool:
    """Generation requests are what the latency figures are about, not /health or /metrics."""
    return request.method == "POST" and request.path.startswith("/v1/")


class Forwarder:
    """The door's catch-all handler: every route that is not the door's own."""

    def __init__(
        self,
        gate: Gate,
        session: aiohttp.ClientSession,
        budget: BodyBudget,
        max_body_bytes: int = protocol.MAX_BODY_BYTES,
    ) -> None:
        self.gate = gate
        self.session = session
        self.budget = budget
        self.max_body_bytes = max_body_bytes
        self.timings: deque[RequestTiming] = deque(maxlen=WINDOW)
        # The requests forwarded now (by id: a request is not hashable), each with whether
        # its answer has begun; a stop's deadline cuts those that have.
        self._open: dict[int, tuple[web.Request, bool]] = {}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        try:
            body = await receive(request, self.budget, self.max_body_bytes)
        except Refusal as refusal:
            self.gate.refused()
            return refusal_response(refusal)
        except ClientLeft:
            self.gate.abandoned += 1
            raise web.HTTPBadRequest() from None  # nobody is there to read an answer
        try:
            return await self._through(request, body, started)
        finally:
            body.release()

    async def _through(
        self, request: web.Request, body: Body, started: float
    ) -> web.StreamResponse:
        headers = _passed(request.headers, _DROPPED_REQUEST)
        headers.update(body.headers())
        arrived: float | None = None
        while True:
            try:
                upstream = await self.gate.admit(arrived)
            except Refusal as refusal:
                self.gate.refused()
                return refusal_response(refusal)
            if request.transport is None or request.transport.is_closing():
                # The client left while it was held: nothing to forward it for.
                self.gate.finished(ok=False)
                self.gate.abandoned += 1
                raise web.HTTPBadRequest()
            try:
                self._open[id(request)] = (request, False)
                return await self._forward(request, upstream, headers, body, started)
            except aiohttp.ClientError as exc:
                # No answer came: vLLM refused the connection (it is not running) or closed it
                # before answering (it stopped while reading the request), or the body did
                # not come whole from the client.
                self.gate.finished(ok=False)
                if body.too_large:
                    self.gate.refused()
                    return refusal_response(too_large(self.max_body_bytes))
                if not self.gate.holding or not body.resendable:
                    self.gate.refused()
                    refused = isinstance(exc, aiohttp.ClientConnectorError)
                    said = protocol.upstream_unavailable() if refused else protocol.upstream_broke()
                    return refusal_response(Refusal(502, said, None))
                # vLLM went away while the door holds: this request waits for the new one.
                arrived = started
            except BaseException:
                self.gate.finished(ok=False)
                raise
            finally:
                self._open.pop(id(request), None)

    def cut(self) -> int:
        """The door's stop deadline passed: every answer under way is cut (the client sees an
        incomplete answer, never a short one taken as whole). Those with no answer begun end
        as their upstream connection closes. Returns how many were open."""
        for request, answering in list(self._open.values()):
            if answering:
                _cut(request)
        return len(self._open)

    async def _forward(
        self,
        request: web.Request,
        upstream: str,
        headers: CIMultiDict[str],
        body: Body,
        started: float,
    ) -> web.StreamResponse:
        # The target as the client wrote it, its escapes kept (yarl would re-encode them).
        url = URL(upstream + request.raw_path, encoded=True)
        async with self.session.request(
            request.method,
            url,
            headers=headers,
            data=body.data(),
            allow_redirects=False,
            skip_auto_headers=SKIP_AUTO_HEADERS,
        ) as answer:
            response = web.StreamResponse(
                status=answer.status,
                reason=answer.reason,
                headers=_passed(answer.headers, _DROPPED_RESPONSE),
            )
            if answer.content_length is not None:
                response.content_length = answer.content_length
            stream = answer.content_type == "text/event-stream"
            tally = SseTally() if stream else None
            self._open[id(request)] = (request, True)
            try:
                await response.prepare(request)
            except (ConnectionResetError, aiohttp.ClientConnectionResetError):
                # The client left before its answer began: its loss, not vLLM's failure.
                self.gate.finished(ok=False)
                self.gate.abandoned += 1
                return response
            first_t: float | None = None
            try:
                async for chunk in answer.content.iter_any():
                    now = time.monotonic()
                    if first_t is None:
                        first_t = now
                    if tally is not None:
                        tally.feed(chunk, now)
                    await response.write(chunk)
            except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError):
                # vLLM's answer broke off: cut the client's too, so it never reads a short
                # answer as a whole one.
                self.gate.finished(ok=False)
                self.gate.refused()
                _cut(request)
                return response
            except (ConnectionResetError, aiohttp.ClientConnectionResetError):
                self.gate.finished(ok=False)
                self.gate.abandoned += 1
                return response
            with contextlib.suppress(ConnectionResetError, aiohttp.ClientConnectionResetError):
                await response.write_eof()
        self.gate.finished(ok=True)
        if _measured(request):
            ttft = None
            if tally is not None:
                first_token = tally.first_token_t if tally.first_token_t is not None else first_t
                ttft = None if first_token is None else first_token - started
            self.timings.append(
                RequestTiming(
                    e2e_s=time.monotonic() - started,
                    ttft_s=ttft,
                    decode_tps=tally.decode_tps() if tally is not None else None,
                )
            )
        return response


def _cut(request: web.Request) -> None:
    transport = request.transport
    if transport is not None:
        # An abort sends no chunked terminator nor the rest of a length: the client sees an
        # incomplete answer, as it would have from vLLM itself.
        transport.abort()
