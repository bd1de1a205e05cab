"""The front door's protocol as constants and values: its control routes, the token header,
the error answers it gives itself, and the addresses it takes. No aiohttp here, so the
supervisor can import it without loading the door's server.
"""

from __future__ import annotations

import re

from vramtop.core.addresses import parse_host_port, parse_url
from vramtop.core.json_types import JsonObject

# The door's own routes live under this prefix, on the listener it forwards (vLLM has none).
PREFIX = "/vramtop/door"
HOLD_ROUTE = PREFIX + "/hold"
RELEASE_ROUTE = PREFIX + "/release"
FAIL_ROUTE = PREFIX + "/fail"
TOKEN_HEADER = "X-Vramtop-Door-Token"
DEFAULT_HOLD_S = 600.0
DEFAULT_DRAIN_S = 120.0
RETRY_AFTER_S = 30
# SIGTERM lets the requests in flight finish this long before the door exits: one deadline
# for them all, after which those still under way are answered (no answer begun: the 503) or
# cut (an answer begun). docs/front-door.md says the same number.
STOP_GRACE_S = 10.0
# One request's body: what a long prompt (or a few images as base64) needs, and no more.
MAX_BODY_BYTES = 256 * 1024 * 1024
# The bodies the door keeps in memory, all requests together: a body is kept (read whole, so
# that a request vLLM dropped during a restart can be sent again) only while it fits here;
# every other body streams to vLLM as it arrives, waiting in the client's connection while
# the request is held.
BODY_MEMORY_BYTES = 64 * 1024 * 1024

# vLLM's generation routes (POST), as its API server lists them at its start ("Route: ...",
# vLLM 0.32): OpenAI's completions, chat completions and responses, Anthropic's messages,
# and vLLM's own token-in generate. A request on one of these with no byte of its answer
# sent yet is cancelled when the door holds for a restart and sent again to the new server
# (vLLM aborts a request whose client closed). Any other route (a render, a tokenize, a
# cancel, /v1/models) is let finish as before: sent twice, it may not mean the same.
GENERATION_ROUTES = frozenset(
    {
        "/v1/completions",
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
        "/inference/v1/generate",
    }
)


def is_generation(method: str, path: str) -> bool:
    """Whether a request (its method, its path without the query) asks vLLM to generate."""
    return method == "POST" and path in GENERATION_ROUTES


# Headers that belong to one connection (RFC 9110 §7.6.1), never forwarded either way.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)


def error_body(message: str, kind: str, code: int) -> JsonObject:
    """OpenAI's error shape, which the agent's client already knows how to read."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def body_too_large(limit_bytes: int) -> JsonObject:
    return error_body(
        f"vramtop's front door takes request bodies of up to {limit_bytes / 2**20:g} MiB "
        "(its --max-body-mib); this one is larger and was not forwarded",
        "request_too_large",
        413,
    )


def bad_request(why: str) -> JsonObject:
    """A request the door cannot forward as it came (its target, its framing)."""
    return error_body(
        f"vramtop's front door did not forward this request: {why}", "bad_request", 400
    )


def door_failed() -> JsonObject:
    return error_body(
        "vramtop's front door failed on this request (its log says why) and did not forward it",
        "internal_error",
        500,
    )


# A path segment that is `.` or `..`, literal or percent-encoded, or an empty one (`//`).
_AMBIGUOUS_SEGMENT = re.compile(r"(?:^|/)(?:\.|%2e){1,2}(?:/|$)|//", re.IGNORECASE)


def target_problem(method: str, target: str, version: tuple[int, int]) -> str | None:
    """Why the door does not forward a request-target as it came, or None.

    The door forwards a path on vLLM's API (origin-form, `/v1/...`) byte for byte. The other
    forms are a proxy's (`GET http://host/x`, `CONNECT host:443`) or the server's own
    (`OPTIONS *`); a path with `.`, `..` or empty segments may name one route to the door and
    another to vLLM. The target itself is not repeated (it may carry a key in its query)."""
    if version < (1, 0):
        return "HTTP/0.9 requests carry no headers; use HTTP/1.1"
    if method == "CONNECT":
        return "CONNECT: the door is not a proxy to other hosts; send requests to its own paths"
    if target == "*":
        return "a request for '*' (the server as a whole): the door forwards paths only"
    if not target.startswith("/"):
        kind = "an absolute URL" if "://" in target else "a host name"
        return (
            f"its target is {kind}, a proxy's form: the door is not a proxy to other hosts; "
            "send the path alone (/v1/...)"
        )
    path = target.split("?", 1)[0].split("#", 1)[0]
    if _AMBIGUOUS_SEGMENT.search(path):
        return (
            "its path has '.', '..' or empty ('//') segments, which the door and vLLM could "
            "read as different routes; send the path without them"
        )
    return None


def held_too_long(hold_s: float) -> JsonObject:
    return error_body(
        f"vramtop's front door held this request for {hold_s:g} s while vLLM restarted, "
        "and vLLM is not serving yet",
        "server_restarting",
        503,
    )


def not_serving(reason: str) -> JsonObject:
    """The answer to the requests held when the supervisor says the new server will not
    serve (`POST /vramtop/door/fail`)."""
    said = " ".join(reason.split())[:500]
    words = "vramtop's front door held this request while vLLM restarted, and vLLM did not "
    words += f"start again: {said}" if said else "start again"
    return error_body(words, "server_restarting", 503)


def door_stopping() -> JsonObject:
    return error_body(
        "vramtop's front door is stopping and did not forward this request",
        "server_restarting",
        503,
    )


def upstream_unavailable() -> JsonObject:
    return error_body(
        "vramtop's front door could not reach vLLM: it refused the connection (it is not "
        "running); the supervisor restarts it or says why it cannot",
        "upstream_unavailable",
        502,
    )


def upstream_broke() -> JsonObject:
    return error_body(
        "vramtop's front door lost the connection to vLLM before it answered (it stopped or "
        "crashed while reading the request)",
        "upstream_unavailable",
        502,
    )


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:8000` for IPv6) → (host, port); ValueError says what is wrong."""
    return parse_host_port(text)


def parse_upstream(text: str) -> str:
    """`http://HOST:PORT` (a trailing slash dropped) → that URL; ValueError says what is
    wrong. Only plain HTTP without a path: the door forwards each path as it came."""
    try:
        parts = parse_url(text, schemes=("http",))
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from None
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError(f"{text!r}: the upstream is http://HOST:PORT, nothing else")
    if parts.path not in ("", "/"):
        raise ValueError(f"{text!r}: the upstream takes no path (the door forwards each path)")
    if parts.port is None:
        raise ValueError(f"{text!r} names no port")
    return f"http://{parts.netloc}"
