"""GETs to one server within a deadline each, over one kept-alive connection: the scraper's
HTTP. Plain `http://` (the usual case, a vLLM on this machine, read every second) goes
through `PlainConnection`, HTTPS through the standard library's `http.client`.

Why not httpx (which the rest of vramtop uses): see `plain_http.py`, and
`python -m bench.bench_own_code`, which measures the three side by side; these GETs are the
largest part of the console's reads each second (`python -m bench.bench_tick`: a whole tick).
"""

from __future__ import annotations

import contextlib
import http.client
import time
import urllib.parse
from collections.abc import Callable
from typing import TypeVar

from vramtop.sources.http_answer import (
    REQUEST_FAILURES,
    STALE_CONNECTION,
    Answer,
    ConnectFailed,
    Deadline,
    Result,
    response_class,
)
from vramtop.sources.plain_http import PlainAnswer, PlainConnection

_C = TypeVar("_C", http.client.HTTPConnection, PlainConnection)
_R = TypeVar("_R")

# Characters a path may hold as they are (RFC 3986 pchar, "/" and "%" escapes already made).
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
# vLLM's /metrics page is ~50 KB; a body larger than this is not one (an endless body would
# otherwise grow the console without bound).
MAX_BODY_BYTES = 4 * 1024 * 1024


class ServerClient:
    """GETs to the server at `url` (shown masked: vramtop sends no password), each done within
    `timeout_s` as a whole; `api_key` goes with /v1/* requests only."""

    def __init__(self, url: str, api_key: str | None, timeout_s: float) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self._api_key = api_key
        # The URL's path, kept before each path asked (http://host:8000/p asks /p/metrics).
        self._prefix = urllib.parse.quote(urllib.parse.urlsplit(url).path, _PATH_SAFE)
        self._connection: http.client.HTTPConnection | PlainConnection | None = None
        self._deadline = Deadline()
        self.response_class = response_class(self._deadline)

    def get(self, path: str) -> Result:
        """The answer to a GET of `path`, or the failure (never raised: see REQUEST_FAILURES);
        after a failure the next request starts on a new connection."""
        try:
            return self._request(path)
        except Exception as exc:
            self.close()  # whatever state the connection is in, the next request starts afresh
            if isinstance(exc, REQUEST_FAILURES):
                return exc
            raise

    def close(self) -> None:
        """Closes the kept-alive connection; a later request opens a new one."""
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()

    def _headers(self, path: str) -> dict[str, str]:
        # vLLM's --api-key guards /v1/* only; the key is sent nowhere else.
        if self._api_key and path.startswith("/v1/"):
            return {"Authorization": f"Bearer {self._api_key}"}
        return {}

    def _request(self, path: str) -> Answer:
        """One GET within `timeout_s` from the start of connecting to the body's last byte."""
        self._deadline.at = time.monotonic() + self.timeout_s
        connection = self._connection or self._open()
        target = self._prefix + path
        headers = self._headers(path)
        reused = connection.sock is not None
        if isinstance(connection, PlainConnection):
            answer = self._stale_retried(
                lambda c: self._plain_send(c, target, headers),
                connection,
                self._open_plain,
                reused,
            )
            if answer.will_close:
                self.close()
            if answer.too_large:
                return Answer(answer.status, "", too_large=True)
            return Answer(answer.status, answer.body.decode("utf-8", errors="replace"))
        response = self._stale_retried(
            lambda c: self._send(c, target, headers),
            connection,
            lambda: self._open_client(urllib.parse.urlsplit(self.url)),
            reused,
        )
        # The deadline bounds every receive (see _DeadlineReader), so one read() is bounded in
        # time, and the cap in size.
        body = response.read(MAX_BODY_BYTES + 1)
        if len(body) > MAX_BODY_BYTES:
            self.close()  # the rest of the body is never read
            return Answer(response.status, "", too_large=True)
        if response.will_close:
            self.close()
        return Answer(response.status, body.decode("utf-8", errors="replace"))

    def _stale_retried(
        self, send: Callable[[_C], _R], connection: _C, reopen: Callable[[], _C], reused: bool
    ) -> _R:
        """`send` on `connection`; when a kept-alive one turns out closed by the server while
        it was idle, once more on a new connection."""
        try:
            return send(connection)
        except STALE_CONNECTION:
            if not reused:
                raise
            self.close()
            return send(reopen())

    def _connect(self, connect: Callable[[], None]) -> None:
        """Connects; a failure other than a timeout is `ConnectFailed` (the server was not
        reached), with its cause."""
        try:
            connect()
        except OSError as exc:
            if isinstance(exc, TimeoutError):
                raise
            raise ConnectFailed(str(exc) or type(exc).__name__) from exc

    def _plain_send(
        self, connection: PlainConnection, target: str, headers: dict[str, str]
    ) -> PlainAnswer:
        if connection.sock is None:
            self._connect(connection.connect)
        return connection.get(target, headers, MAX_BODY_BYTES)

    def _send(
        self, connection: http.client.HTTPConnection, target: str, headers: dict[str, str]
    ) -> http.client.HTTPResponse:
        """Sends the request and reads the status line and headers."""
        if connection.sock is None:
            connection.timeout = self._deadline.left()
            self._connect(connection.connect)
        assert connection.sock is not None
        connection.sock.settimeout(self._deadline.left())
        # http.client adds Host, and Accept-Encoding: identity (no compressed body to undo).
        connection.request("GET", target, headers=headers)
        return connection.getresponse()

    def _open(self) -> http.client.HTTPConnection | PlainConnection:
        """A new, not yet connected, connection to the server (kept until an error or close):
        plain HTTP through `PlainConnection`, HTTPS through http.client."""
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme.lower() == "http":
            return self._open_plain()
        return self._open_client(parts)

    def _open_plain(self) -> PlainConnection:
        parts = urllib.parse.urlsplit(self.url)
        if not parts.hostname:
            raise http.client.InvalidURL(f"no host in {self.url}")
        port = parts.port  # a ValueError for a port that is not a number
        connection = PlainConnection(parts.hostname, 80 if port is None else port, self._deadline)
        self._connection = connection
        return connection

    def _open_client(self, parts: urllib.parse.SplitResult) -> http.client.HTTPSConnection:
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise http.client.InvalidURL(f"unsupported URL scheme {parts.scheme!r} in {self.url}")
        if not parts.hostname:
            raise http.client.InvalidURL(f"no host in {self.url}")
        # The port given, always: http.client would read an IPv6 address's last group as one.
        port = parts.port  # a ValueError for a port that is not a number
        # The default SSL context: the system's CAs, the host name checked.
        connection = http.client.HTTPSConnection(
            parts.hostname, 443 if port is None else port, timeout=self.timeout_s
        )
        connection.response_class = self.response_class
        self._connection = connection
        return connection
