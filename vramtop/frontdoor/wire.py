"""What aiohttp's HTTP parser refuses, answered as the door answers everything else.

A request line or header aiohttp cannot parse (a NUL in the target, a bad Content-Length,
Transfer-Encoding with Content-Length, an unknown method, headers over its limits) never
reaches the door's handlers: aiohttp answers it itself, in plain text, and logs a traceback
at ERROR. Here it is answered 400 in OpenAI's error shape and logged in one line.
"""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.web_request import BaseRequest

from vramtop.frontdoor import protocol

log = logging.getLogger(__name__)


def _reason(exc: BaseException | None) -> str:
    """aiohttp's words for what it refused, without the bytes it quotes from the request
    (a target may carry a key)."""
    words = str(getattr(exc, "message", "") or exc or "").strip()
    first = words.splitlines()[0] if words else ""
    first = first.split(": b'")[0].split(': b"')[0].rstrip(":. ")
    return first[:160] or "a malformed request"


class _Connection(web.RequestHandler):
    __slots__ = ()

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500:
            return super().handle_error(request, status, exc, message)
        why = _reason(exc)
        log.warning("refused a malformed request from %s: %s", request.remote, why)
        if request.writer.output_size > 0:
            raise ConnectionError("an answer was under way already")
        body = protocol.error_body(
            f"vramtop's front door did not forward this request: it is not valid HTTP/1.1 ({why})",
            "bad_request",
            status,
        )
        answer = web.json_response(body, status=status)
        answer.force_close()
        return answer


class _Server(web.Server):
    def __call__(self) -> web.RequestHandler:
        return _Connection(self, loop=self._loop, **self._kwargs)


class DoorRunner(web.AppRunner):
    """aiohttp's runner for the door's application, its connections answering parse errors in
    OpenAI's error shape."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _Server
        return server
