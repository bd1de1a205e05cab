"""The door's web application: its control routes under `/vramtop/door` and the forwarder for
every other route, on one listener; the status it reports and the stats file it keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from vramtop.core.door_stats import summarize
from vramtop.frontdoor import protocol
from vramtop.frontdoor.bodies import BodyBudget
from vramtop.frontdoor.gate import Gate
from vramtop.frontdoor.proxy import Forwarder
from vramtop.frontdoor.stats_file import StatsWriter

log = logging.getLogger(__name__)

# The control routes' bodies are a few words of JSON (aiohttp's own limit is 1 MiB); the
# forwarded bodies have their own limit (`DoorSettings.max_body_bytes`).
MAX_CONTROL_BYTES = 64 * 1024
STATS_EVERY_S = 1.0
# Connections to vLLM kept open for reuse; vLLM's own limit on requests is far higher.
POOL_LIMIT = 1000


@dataclass(frozen=True)
class DoorSettings:
    upstream: str | None
    hold_s: float = protocol.DEFAULT_HOLD_S
    token: str | None = None
    stats_file: Path | None = None
    max_body_bytes: int = protocol.MAX_BODY_BYTES
    body_memory_bytes: int = protocol.BODY_MEMORY_BYTES
    stop_grace_s: float = protocol.STOP_GRACE_S
    # A hold sends the generations with no answer begun again to the new server (False: it
    # lets every request in flight finish, as the door did before; `REPLAY_ENV`, to measure
    # the one against the other).
    replay: bool = True


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
        # Added: the request bodies kept in memory now, of the door's budget for them.
        "bodies_kept_bytes": app[FORWARDER].budget.kept_bytes,
        # Added: requests a hold cancelled upstream, to be sent again to the new server.
        "replayed_total": gate.replayed,
        # Added: seconds from the last release to the first request answered whole after
        # it (null: none yet, or never released).
        "first_served_s": None if gate.first_served_s is None else round(gate.first_served_s, 3),
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
    gate.start_holding()
    # The generations with no answer begun wait at the door for the new server instead of
    # holding the restart up; the answers begun are let finish, up to `drain_s`.
    replayed = request.app[FORWARDER].recall() if request.app[SETTINGS].replay else 0
    draining = gate.in_flight  # the answers begun (and other routes' requests), let finish
    began = gate.clock()
    drained = await gate.drain(float(drain_s))
    return _json(
        {
            "drained": drained,
            "in_flight": gate.in_flight,
            # Added: the requests cancelled upstream to be sent again once released, and how
            # long the answers begun took to finish (or `drain_s`, when they did not).
            "replayed": replayed,
            "drain_took_s": round(gate.clock() - began, 3),
            # Added: how many requests that drain waited for.
            "drained_requests": draining,
        }
    )


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


async def _write_stats(app: web.Application, writer: StatsWriter) -> None:
    last = b""
    while True:
        data = json.dumps(status(app)).encode()
        if data != last:
            writer.write(data)
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
    settings = app[SETTINGS]
    budget = BodyBudget(settings.body_memory_bytes)
    app[FORWARDER] = Forwarder(app[GATE], session, budget, settings.max_body_bytes)
    path = settings.stats_file
    stats = StatsWriter(path) if path is not None else None
    writer = asyncio.create_task(_write_stats(app, stats)) if stats is not None else None
    yield
    if writer is not None:
        writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await writer
    if stats is not None:
        stats.write(json.dumps(status(app)).encode())
    await session.close()


async def _forward(request: web.Request) -> web.StreamResponse:
    return await request.app[FORWARDER].handle(request)


async def _stop_holding(app: web.Application) -> None:
    # SIGTERM: the requests still held get an answer rather than a closed connection.
    app[GATE].stop()


async def cut_at(app: web.Application, grace_s: float) -> None:
    """The stop's deadline, `grace_s` after SIGTERM: the requests still forwarded are cut or
    answered (their upstream connections closed: no answer begun is the 503), and the log
    says how many."""
    await asyncio.sleep(grace_s)
    forwarder = app[FORWARDER]
    open_now = forwarder.cut()
    await forwarder.session.close()
    if open_now:
        log.warning(
            "stopping: %d request(s) still under way after the %g s grace were cut",
            open_now,
            grace_s,
        )


@web.middleware
async def _answers(request: web.Request, handler: Any) -> web.StreamResponse:
    """Every answer the door gives itself in OpenAI's error shape: a request-target it does not
    forward (400), aiohttp's own refusals, and a failure of the door's (500, logged)."""
    problem = protocol.target_problem(
        request.method, request.raw_path, (request.version.major, request.version.minor)
    )
    if problem is not None:
        log.warning("refused a request from %s: %s", request.remote, problem)
        refused = _json(protocol.bad_request(problem), 400)
        refused.force_close()  # what else the client sends on this connection is suspect
        return refused
    try:
        answer: web.StreamResponse = await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400 or exc.content_type == "application/json":
            raise
        kind = "bad_request" if exc.status < 500 else "internal_error"
        said = f"vramtop's front door: {exc.reason.lower()}"
        return _json(protocol.error_body(said, kind, exc.status), exc.status)
    except Exception:
        log.exception("a request failed in the front door")
        return _json(protocol.door_failed(), 500)
    return answer


def make_app(settings: DoorSettings) -> web.Application:
    app = web.Application(client_max_size=MAX_CONTROL_BYTES, middlewares=[_answers])
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
