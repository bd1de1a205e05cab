"""Forwarding one request to vLLM: headers and body through, the answer streamed back chunk by
chunk as it arrives (`iter_any`), never re-encoded nor gathered whole.

The request's body is read first (an OpenAI request is JSON, small beside what it asks for),
so a held request keeps it while it waits and is sent with its own length.
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
from vramtop.frontdoor.gate import Gate, Refusal

# Headers aiohttp's client would add on its own; the door sends only what the client sent.
SKIP_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
# Request headers the door does not pass on as they came: the connection's own, the Host
# (the upstream's is sent), the length (recomputed from the body, the same number) and an
# Expect (the door has read the whole body already).
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

    def __init__(self, gate: Gate, session: aiohttp.ClientSession) -> None:
        self.gate = gate
        self.session = session
        self.timings: deque[RequestTiming] = deque(maxlen=WINDOW)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        body = await request.read()
        headers = _passed(request.headers, _DROPPED_REQUEST)
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
                return await self._forward(request, upstream, headers, body, started)
            except aiohttp.ClientError as exc:
                # No answer came: vLLM refused the connection (it is not running) or closed it
                # before answering (it stopped while reading the request).
                self.gate.finished(ok=False)
                if not self.gate.holding:
                    self.gate.refused()
                    refused = isinstance(exc, aiohttp.ClientConnectorError)
                    said = protocol.upstream_unavailable() if refused else protocol.upstream_broke()
                    return refusal_response(Refusal(502, said, None))
                # vLLM went away while the door holds: this request waits for the new one.
                arrived = started
            except BaseException:
                self.gate.finished(ok=False)
                raise

    async def _forward(
        self,
        request: web.Request,
        upstream: str,
        headers: CIMultiDict[str],
        body: bytes,
        started: float,
    ) -> web.StreamResponse:
        # The target as the client wrote it, its escapes kept (yarl would re-encode them).
        url = URL(upstream + request.raw_path, encoded=True)
        async with self.session.request(
            request.method,
            url,
            headers=headers,
            data=body if body else None,
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
