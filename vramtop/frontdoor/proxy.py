"""Forwarding one request to vLLM: headers and body through, the answer streamed back chunk by
chunk as it arrives (`iter_any`), never re-encoded nor gathered whole.

The request's body is kept whole while the door's body budget allows (an OpenAI request is
JSON, small beside what it asks for), so a request vLLM drops during a restart is sent again
to the new server; a body past the budget streams through (`bodies.py`).

A hold for a restart does not wait for a generation (`protocol.is_generation`) the door has
sent no byte of the answer of (a request not streamed, or a stream before its first chunk):
it is cancelled upstream (`Forwarder.recall`) and waits at the door with the new requests, to
be sent again to the new server. For such a request the door starts its client's answer only
once vLLM's first chunk has come, so that until then nothing was said that a second answer
would contradict. An answer begun is let finish (the hold's drain).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
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


class _Recalled(Exception):
    """A hold cancelled the request upstream before any of its answer went out: it waits
    at the door to be sent again."""


@dataclass(eq=False)
class _Open:
    """A request forwarded now: whether its client's answer has begun, and while it has not
    (a generation with a kept body), the wait for vLLM's answer that a hold may cancel."""

    request: web.Request
    answering: bool = False
    waiting: asyncio.Future[tuple[aiohttp.ClientResponse, bytes]] | None = field(
        default=None, repr=False
    )
    recalled: bool = False


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
        # its answer has begun; a stop's deadline cuts those that have, a hold recalls those
        # waiting for their answer's start.
        self._open: dict[int, _Open] = {}

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
            # Only a body kept whole can be sent again after it went out (a streamed one was
            # taken from the client's connection as it went).
            replayable = protocol.is_generation(request.method, request.path) and body.kept_whole
            if replayable and self.gate.holding:
                # Let through by a release, then held again before it went out (a hold came
                # in between): the server it was let through to is about to stop.
                self.gate.finished(ok=False)
                arrived = started
                continue
            entry = _Open(request)
            try:
                self._open[id(request)] = entry
                return await self._forward(entry, upstream, headers, body, started, replayable)
            except _Recalled:
                self.gate.finished(ok=False)
                self.gate.replayed += 1
                arrived = started
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
        for entry in list(self._open.values()):
            if entry.answering:
                _cut(entry.request)
        return len(self._open)

    def recall(self) -> int:
        """The door holds for a restart: every generation forwarded with no byte of its
        answer sent to its client yet is cancelled upstream (its connection to vLLM closed:
        vLLM aborts it), to wait at the door by its arrival and be sent again once released.
        Returns how many."""
        count = 0
        for entry in self._open.values():
            if entry.waiting is not None and not entry.recalled and entry.waiting.cancel():
                entry.recalled = True
                count += 1
        return count

    async def _answer_start(
        self, request: web.Request, url: URL, headers: CIMultiDict[str], body: Body
    ) -> tuple[aiohttp.ClientResponse, bytes]:
        """vLLM's answer, with its first chunk read (empty: an answer without a body)."""
        answer = await self.session.request(
            request.method,
            url,
            headers=headers,
            data=body.data(),
            allow_redirects=False,
            skip_auto_headers=SKIP_AUTO_HEADERS,
        )
        try:
            first = await answer.content.readany()
        except BaseException:
            answer.close()  # the connection too: vLLM sees its client gone and aborts
            raise
        return answer, first

    async def _recallable_start(
        self,
        entry: _Open,
        url: URL,
        headers: CIMultiDict[str],
        body: Body,
    ) -> tuple[aiohttp.ClientResponse, bytes]:
        """`_answer_start` as a task a hold may cancel (`recall`): then `_Recalled`."""
        waiting = asyncio.ensure_future(self._answer_start(entry.request, url, headers, body))
        entry.waiting = waiting
        try:
            return await waiting
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if entry.recalled and (task is None or task.cancelling() == 0):
                raise _Recalled() from None
            raise
        finally:
            entry.waiting = None

    async def _forward(
        self,
        entry: _Open,
        upstream: str,
        headers: CIMultiDict[str],
        body: Body,
        started: float,
        replayable: bool,
    ) -> web.StreamResponse:
        request = entry.request
        # The target as the client wrote it, its escapes kept (yarl would re-encode them).
        url = URL(upstream + request.raw_path, encoded=True)
        first: bytes | None = None
        if replayable:
            answer, first = await self._recallable_start(entry, url, headers, body)
        else:
            answer = await self.session.request(
                request.method,
                url,
                headers=headers,
                data=body.data(),
                allow_redirects=False,
                skip_auto_headers=SKIP_AUTO_HEADERS,
            )
        async with answer:
            response = web.StreamResponse(
                status=answer.status,
                reason=answer.reason,
                headers=_passed(answer.headers, _DROPPED_RESPONSE),
            )
            if answer.content_length is not None:
                response.content_length = answer.content_length
            stream = answer.content_type == "text/event-stream"
            tally = SseTally() if stream else None
            entry.answering = True
            try:
                await response.prepare(request)
            except (ConnectionResetError, aiohttp.ClientConnectionResetError):
                # The client left before its answer began: its loss, not vLLM's failure.
                self.gate.finished(ok=False)
                self.gate.abandoned += 1
                return response
            first_t: float | None = None
            try:
                async for chunk in _chunks(first, answer):
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


async def _chunks(first: bytes | None, answer: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The answer's body as it arrives: `first` (read already, when not None), then the rest."""
    if first is not None:
        if not first:
            return  # the whole body was empty
        yield first
    async for chunk in answer.content.iter_any():
        yield chunk


def _cut(request: web.Request) -> None:
    transport = request.transport
    if transport is not None:
        # An abort sends no chunked terminator nor the rest of a length: the client sees an
        # incomplete answer, as it would have from vLLM itself.
        transport.abort()
