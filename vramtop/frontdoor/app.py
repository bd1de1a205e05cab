"""The door's web application: its control routes under `/vramtop/door` and the forwarder for
every other route, on one listener; the status it reports and the stats file it keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from vramtop import files
from vramtop.core.door_stats import summarize
from vramtop.frontdoor import protocol
from vramtop.frontdoor.gate import Gate
from vramtop.frontdoor.proxy import Forwarder

# A request body may be a long prompt: aiohttp's own limit is 1 MiB.
MAX_REQUEST_BYTES = 256 * 1024 * 1024
STATS_EVERY_S = 1.0
# Connections to vLLM kept open for reuse; vLLM's own limit on requests is far higher.
POOL_LIMIT = 1000


@dataclass(frozen=True)
class DoorSettings:
    upstream: str | None
    hold_s: float = protocol.DEFAULT_HOLD_S
    token: str | None = None
    stats_file: Path | None = None


GATE = web.AppKey("gate", Gate)
FORWARDER = web.AppKey("forwarder", Forwarder)
SETTINGS = web.AppKey("settings", DoorSettings)
STARTED = web.AppKey("started", float)


def status(app: web.Application) -> dict[str, Any]:
    gate = app[GATE]
    latency = summarize(app[FORWARDER].timings)
    return {
        "upstream": gate.upstream,
        "holding": gate.holding,
        "in_flight": gate.in_flight,
        "held": gate.held,
        "served": gate.served,
        "failed": gate.failed,
        "longest_hold_s": round(gate.longest_hold_now(), 3),
        **latency.fields(),
        "pid": os.getpid(),
        "started": app[STARTED],
        # Added: requests ever held, and those whose client left before their answer.
        "held_total": gate.held_total,
        "abandoned": gate.abandoned,
    }


def _json(body: dict[str, Any], status_code: int = 200) -> web.Response:
    return web.json_response(body, status=status_code)


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):  # (nested deeper than the parser recurses)
        raise web.HTTPBadRequest(
            text=json.dumps(protocol.error_body("the body is not JSON", "bad_request", 400)),
            content_type="application/json",
        ) from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(
            text=json.dumps(protocol.error_body("the body is not an object", "bad_request", 400)),
            content_type="application/json",
        )
    return body


def _bad(message: str) -> web.Response:
    return _json(protocol.error_body(message, "bad_request", 400), 400)


def _forbidden(request: web.Request) -> web.Response | None:
    """403 unless the request carries the door's token (the POSTs change what it does)."""
    token = request.app[SETTINGS].token
    given = request.headers.get(protocol.TOKEN_HEADER, "")
    if token is not None and hmac.compare_digest(given.encode(), token.encode()):
        return None
    why = "a wrong or missing token" if token else "the door was started without --token-file"
    return _json(protocol.error_body(f"forbidden: {why}", "forbidden", 403), 403)


async def _get_status(request: web.Request) -> web.Response:
    return _json(status(request.app))


async def _hold(request: web.Request) -> web.Response:
    if (refused := _forbidden(request)) is not None:
        return refused
    body = await _body(request)
    drain_s = body.get("drain_s", protocol.DEFAULT_DRAIN_S)
    if isinstance(drain_s, bool) or not isinstance(drain_s, int | float):
        return _bad("drain_s is a number of seconds")
    if not math.isfinite(drain_s) or drain_s < 0:
        return _bad("drain_s is a number of seconds, 0 or more")
    gate = request.app[GATE]
    drained = await gate.hold(float(drain_s))
    return _json({"drained": drained, "in_flight": gate.in_flight})


async def _release(request: web.Request) -> web.Response:
    if (refused := _forbidden(request)) is not None:
        return refused
    body = await _body(request)
    upstream = body.get("upstream")
    if upstream is not None:
        if not isinstance(upstream, str):
            return _bad("upstream is http://HOST:PORT")
        try:
            upstream = protocol.parse_upstream(upstream)
        except ValueError as exc:
            return _bad(str(exc))
    gate = request.app[GATE]
    try:
        released = gate.release(upstream)
    except ValueError as exc:
        return _bad(str(exc))
    return _json({"released": released})


async def _fail(request: web.Request) -> web.Response:
    if (refused := _forbidden(request)) is not None:
        return refused
    body = await _body(request)
    reason = body.get("reason", "")
    if not isinstance(reason, str):
        return _bad("reason is text")
    return _json({"failed": request.app[GATE].fail(reason)})


async def _write_stats(app: web.Application) -> None:
    path = app[SETTINGS].stats_file
    if path is None:
        return
    last = b""
    while True:
        data = json.dumps(status(app)).encode()
        if data != last:
            with contextlib.suppress(OSError):
                files.write_atomic(path, data)
            last = data
        await asyncio.sleep(STATS_EVERY_S)


async def _lifecycle(app: web.Application) -> Any:
    connector = aiohttp.TCPConnector(limit=POOL_LIMIT, use_dns_cache=True)
    session = aiohttp.ClientSession(
        connector=connector,
        auto_decompress=False,
        # No read timeout: a long prompt's prefill, or a long answer, takes what it takes.
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        cookie_jar=aiohttp.DummyCookieJar(),
    )
    app[FORWARDER] = Forwarder(app[GATE], session)
    writer = asyncio.create_task(_write_stats(app))
    yield
    writer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await writer
    path = app[SETTINGS].stats_file
    if path is not None:
        with contextlib.suppress(OSError):
            files.write_atomic(path, json.dumps(status(app)).encode())
    await session.close()


async def _forward(request: web.Request) -> web.StreamResponse:
    return await request.app[FORWARDER].handle(request)


async def _stop_holding(app: web.Application) -> None:
    # SIGTERM: the requests still held get an answer rather than a closed connection.
    app[GATE].stop()


def make_app(settings: DoorSettings) -> web.Application:
    app = web.Application(client_max_size=MAX_REQUEST_BYTES)
    app[SETTINGS] = settings
    app[GATE] = Gate(settings.upstream, settings.hold_s)
    app[STARTED] = time.time()
    app.cleanup_ctx.append(_lifecycle)
    app.on_shutdown.append(_stop_holding)
    app.router.add_get(protocol.PREFIX, _get_status)
    app.router.add_post(protocol.HOLD_ROUTE, _hold)
    app.router.add_post(protocol.RELEASE_ROUTE, _release)
    app.router.add_post(protocol.FAIL_ROUTE, _fail)
    app.router.add_route("*", "/{tail:.*}", _forward)
    return app
