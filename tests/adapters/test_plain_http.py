"""The plain-HTTP client against canned answers: the shapes of an HTTP/1.1 answer it must
read as http.client does, on a socket server that replays exactly the bytes given."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from vramtop.sources.http_answer import Deadline
from vramtop.sources.plain_http import PlainConnection
from vramtop.sources.scraper import Scraper


class Canned:
    """Accepts connections; answers each request with the next of `answers` (bytes sent
    as they are), then keeps the connection open unless told to close it."""

    def __init__(self, answers: list[bytes], close_after: bool = False) -> None:
        self.answers = list(answers)
        self.close_after = close_after
        self.requests: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while self.answers:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                while self.answers:
                    request = b""
                    while b"\r\n\r\n" not in request:
                        data = conn.recv(65536)
                        if not data:
                            break
                        request += data
                    if not request:
                        break
                    self.requests.append(request)
                    for part in self.answers.pop(0).split(b"|PAUSE|"):
                        conn.sendall(part)
                        time.sleep(0.02)  # not a wait: the answer comes in parts
                    if self.close_after:
                        break

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def canned() -> Iterator[list[Canned]]:
    made: list[Canned] = []
    yield made
    for server in made:
        server.close()


def _get(server: Canned, max_body: int = 1 << 20) -> tuple[int, bytes, bool, bool]:
    deadline = Deadline()
    deadline.at = time.monotonic() + 5
    connection = PlainConnection("127.0.0.1", server.port, deadline)
    connection.connect()
    try:
        answer = connection.get("/metrics", {"Authorization": "Bearer k"}, max_body)
    finally:
        connection.close()
    return answer.status, answer.body, answer.too_large, answer.will_close


def test_a_chunked_body_is_put_together(canned: list[Canned]) -> None:
    server = Canned(
        [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n|PAUSE|7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n"
        ]
    )
    canned.append(server)
    assert _get(server) == (200, b"hello, world", False, False)
    request = server.requests[0]
    assert request.startswith(b"GET /metrics HTTP/1.1\r\n")
    assert b"\r\nHost: 127.0.0.1:" in request and b"\r\nAuthorization: Bearer k\r\n" in request


def test_an_interim_answer_is_skipped_and_bare_newlines_are_read(canned: list[Canned]) -> None:
    server = Canned([b"HTTP/1.1 100 Continue\n\nHTTP/1.1 503 Busy\nContent-Length: 4\n\nbusy"])
    canned.append(server)
    assert _get(server) == (503, b"busy", False, False)


def test_a_body_without_a_length_is_read_to_the_close(canned: list[Canned]) -> None:
    server = Canned([b"HTTP/1.0 200 OK\r\n\r\nall of it|PAUSE| and more"], close_after=True)
    canned.append(server)
    assert _get(server) == (200, b"all of it and more", False, True)


def test_no_body_for_no_content(canned: list[Canned]) -> None:
    server = Canned([b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"])
    canned.append(server)
    assert _get(server) == (204, b"", False, True)


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1388\r\n",
        b"HTTP/1.1 200 OK\r\n\r\n" + b"#" * 5000,
    ],
    ids=["content-length", "chunked", "to-the-close"],
)
def test_a_body_past_the_cap_is_not_read(canned: list[Canned], head: bytes) -> None:
    server = Canned([head], close_after=True)
    canned.append(server)
    assert _get(server, max_body=1000) == (200, b"", True, True)


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (b"", http.client.RemoteDisconnected),
        (b"SSH-2.0-OpenSSH\r\n\r\n", http.client.BadStatusLine),
        (b"HTTP/1.1 2OO OK\r\n\r\n", http.client.BadStatusLine),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", http.client.IncompleteRead),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            http.client.IncompleteRead,
        ),
    ],
    ids=["closed", "not-http", "bad-status", "cut-short", "bad-chunk"],
)
def test_a_broken_answer_fails_as_http_client_fails(
    canned: list[Canned], answer: bytes, error: type[Exception]
) -> None:
    server = Canned([answer], close_after=True)
    canned.append(server)
    with pytest.raises(error):
        _get(server)


def test_a_header_value_with_a_line_break_is_refused_before_sending() -> None:
    deadline = Deadline()
    deadline.at = time.monotonic() + 5
    connection = PlainConnection("127.0.0.1", 9, deadline)
    connection.sock = socket.socket()  # never used: the request is refused first
    try:
        with pytest.raises(ValueError):
            connection.get("/v1/models", {"Authorization": "Bearer k\r\nX: y"}, 100)
    finally:
        connection.close()


def test_the_scraper_reads_a_chunked_metrics_page(canned: list[Canned]) -> None:
    page = b'vllm:num_requests_running{engine="0"} 2.0\n'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(page), page)
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    server = Canned([head + chunked, ok, ok, ok])
    canned.append(server)
    scraper = Scraper(f"http://127.0.0.1:{server.port}")
    try:
        reading = scraper.read_sync()
    finally:
        scraper.close()
    assert reading.reachable and reading.metrics is not None
    assert reading.metrics.requests_running == 2.0
    assert len(server.requests) == 4  # /metrics, /health, /version, /v1/models on one connection
