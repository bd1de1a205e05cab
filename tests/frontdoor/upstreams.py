"""Small real HTTP upstreams for the door's tests, each on a port of its own in a thread: one
that echoes what it was sent and answers with chosen headers, a fixed SSE stream whose exact
bytes the test knows, one that breaks off mid-stream, a gzip answer, a body echo (its length
or its chunks), one that never answers (`/hang`) or hangs after its first event
(`/sse-hang`), and the list of what it was asked (`/seen`).

An upstream made with `slow` answers every POST slowly: `answer`, as vLLM computing a long
answer (nothing sent until the server stops); `headers`, a stream whose headers went out and
no chunk yet; `stream`, a stream begun: one event, the rest once the test sets `finish_now`."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.ports import free_port

GZIPPED = gzip.compress(b'{"zipped": true}' * 50)


def sse_events(n: int) -> list[bytes]:
    """The fixed stream /sse sends: a comment, n data events, one with CRLF line ends, DONE."""
    events = [b": a comment line\n\n"]
    events += [b'data: {"i": %d, "text": "tok%d"}\n\n' % (i, i) for i in range(n)]
    events.append(b'data: {"crlf": true}\r\n\r\n')
    events.append(b"data: [DONE]\n\n")
    return events


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        seen: list[list[str]] = self.server.seen  # type: ignore[attr-defined]
        seen.append([self.command, self.path])
        if parts.path == "/echo":
            body = json.dumps(
                {"headers": [[k, v] for k, v in self.headers.items()], "path": self.path}
            ).encode()
            self._send(
                200,
                body,
                [
                    ("Content-Type", "application/json"),
                    ("X-Upstream", "yes"),
                    ("Set-Cookie", "a=1"),
                    ("Set-Cookie", "b=2"),
                    ("Keep-Alive", "timeout=5"),
                ],
            )
        elif parts.path in ("/sse", "/cut"):
            n = int(query.get("n", ["5"])[0])
            gap = float(query.get("gap", ["0"])[0])
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            events = sse_events(n)
            if parts.path == "/cut":
                for event in events[:3]:
                    self._chunk(event)
                time.sleep(gap)  # not a wait: the upstream is slow before it cuts the answer
                self.close_connection = True
                self.connection.shutdown(2)  # no terminating chunk: an answer cut short
                return
            for event in events:
                self._chunk(event)
                if gap:
                    time.sleep(gap)  # not a wait: a slow upstream, events `gap` s apart
            self.wfile.write(b"0\r\n\r\n")
        elif parts.path == "/hang":
            self.server.stopping.wait()  # type: ignore[attr-defined]
            self.close_connection = True
        elif parts.path == "/sse-hang":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._chunk(sse_events(1)[1])
            self.server.stopping.wait()  # type: ignore[attr-defined]
            self.close_connection = True
        elif parts.path == "/seen":
            self._send(200, json.dumps(seen).encode(), [("Content-Type", "application/json")])
        elif parts.path == "/gzip":
            self._send(
                200,
                GZIPPED,
                [("Content-Type", "application/json"), ("Content-Encoding", "gzip")],
            )
        else:
            self._send(404, b'{"detail": "Not Found"}', [("Content-Type", "application/json")])

    def _body(self) -> bytes:
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            return self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = b""
        while size := int(self.rfile.readline().split(b";")[0], 16):
            body += self.rfile.read(size)
            self.rfile.readline()
        self.rfile.readline()
        return body

    def do_POST(self) -> None:
        body = self._body()
        if self.path.startswith("/drop-once") and self.path not in self.server.dropped:  # type: ignore[attr-defined]
            # The first time: the body read, then the connection closed without an answer
            # once the test says so (`drop_now`), as a vLLM stopped during a restart does.
            self.server.dropped.add(self.path)  # type: ignore[attr-defined]
            self.server.seen.append([self.command, self.path])  # type: ignore[attr-defined]
            self.server.drop_now.wait()  # type: ignore[attr-defined]
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.server.seen.append([self.command, self.path])  # type: ignore[attr-defined]
        if self.server.slow:  # type: ignore[attr-defined]
            self._slow(self.server.slow)  # type: ignore[attr-defined]
            return
        self._send(200, body, [("Content-Type", "application/octet-stream")])

    def _slow(self, how: str) -> None:
        server: Any = self.server
        if how != "answer":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
        if how == "stream":
            events = sse_events(3)
            self._chunk(events[1])
            server.finish_now.wait()
            for event in events[2:]:
                self._chunk(event)
            self.wfile.write(b"0\r\n\r\n")
            return
        server.stopping.wait()
        self.close_connection = True


@contextmanager
def upstream_server(slow: str | None = None) -> Iterator[ThreadingHTTPServer]:
    """A running test upstream; yields the server (`drop_now` releases `/drop-once`;
    `stopping` set: the slow answers end, their connections closed unanswered)."""
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Handler)
    server.slow = slow  # type: ignore[attr-defined]
    server.daemon_threads = True
    server.seen = []  # type: ignore[attr-defined]
    server.stopping = threading.Event()  # type: ignore[attr-defined]
    server.drop_now = threading.Event()  # type: ignore[attr-defined]
    server.finish_now = threading.Event()  # type: ignore[attr-defined]
    server.dropped = set()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


@contextmanager
def upstream() -> Iterator[str]:
    """A running test upstream; yields its URL."""
    with upstream_server() as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"
