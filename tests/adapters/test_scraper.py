"""The scraper against a real HTTP server on localhost (http.server in a thread)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import ssl
import subprocess
import threading
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support import ports
from vramtop.core.model import ServerReading
from vramtop.core.vllm.metrics import parse_metrics
from vramtop.sources import scraper as scraper_module
from vramtop.sources.metrics_page import SHORT_PAGE, WHOLE_PAGE
from vramtop.sources.scraper import _HEALTH_EVERY_READS, MAX_BODY_BYTES, Scraper

_ROOT = Path(__file__).resolve().parents[2]
_CANDIDATES = (
    _ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "metrics.txt",
    _ROOT.parent / "shared" / "fixtures" / "vllm-0.32-cpu" / "metrics.txt",
)
_SMALL_PAGE = (
    "# TYPE vllm:generation_tokens counter\n"
    'vllm:generation_tokens_total{engine="0",model_name="tiny"} 903.0\n'
    'vllm:num_requests_running{engine="0",model_name="tiny"} 0.0\n'
)


def _page() -> str:
    for path in _CANDIDATES:
        if path.is_file():
            return path.read_text()
    return _SMALL_PAGE  # the scraper, not the parser, is under test here


@dataclass
class FakeVllm:
    """What the fake server answers; tests change it between reads."""

    metrics: str = field(default_factory=_page)
    metrics_status: int = 200
    health_status: int = 200
    api_key: str | None = None
    hang: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    hits: Counter[str] = field(default_factory=Counter)
    # The Authorization header each request came with, by path as asked.
    auth: dict[str, str | None] = field(default_factory=dict)
    # "HTTP/1.1" keeps connections open, as vLLM's server (uvicorn) does; "HTTP/1.0" closes
    # each after its response.
    protocol: str = "HTTP/1.1"
    # "say": answer with Connection: close, then close; "silently": close after the answer
    # without saying so, as a server closing an idle keep-alive connection does.
    close: str | None = None
    # "headers" or "body": send that part a byte every 0.05 s, a server stuck mid-answer.
    trickle: str | None = None
    trickled_all: threading.Event = field(default_factory=threading.Event)  # its last byte sent
    prefix: str = ""  # the paths the server answers, under this prefix
    # What /metrics/?name[]=… answers: "kept" (the samples named, as prometheus_client
    # writes them), "whole" (the query ignored), "empty" (a registry that knows no names);
    # None: 404, as the simulator answers.
    short_page: str | None = None
    peers: list[tuple[str, int]] = field(default_factory=list)  # one per accepted connection
    url: str = ""
    version: object = "0.32.0"  # what /version says its version is
    model: dict[str, object] = field(default_factory=lambda: {"id": "tiny", "max_model_len": 512})


def _handler(state: FakeVllm) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Headers and body go out in two writes: with Nagle's algorithm on a kept-alive
        # connection the body waits for the client's delayed ACK (as in vramtop/sim/http_api.py).
        disable_nagle_algorithm = True

        def setup(self) -> None:
            super().setup()
            self.protocol_version = state.protocol
            state.peers.append(self.client_address)

        def log_message(self, *args: object) -> None:  # keep test output quiet
            pass

        def _trickle(self, data: bytes) -> None:
            for byte in data:
                if state.released.is_set():
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                state.released.wait(0.05)  # a byte every 0.05 s until the test ends
            state.trickled_all.set()

        def _send(self, status: int, body: str, kind: str = "text/plain") -> None:
            if state.trickle is not None:
                self._send_slowly(state.trickle)
                return
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            if state.close == "say":
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            if state.close == "silently":
                self.close_connection = True

        def _send_slowly(self, part: str) -> None:
            """An answer of a few seconds: its status line and headers, or its body (a
            comment-only metrics page), a byte every 0.05 s."""
            self.close_connection = True
            head = b"HTTP/1.1 200 OK\r\nContent-Length: 120\r\n\r\n"
            body = b"#" * 119 + b"\n"
            if part == "headers":
                self._trickle(head + body)
            else:
                self.wfile.write(head)
                self._trickle(body)

        def do_GET(self) -> None:
            state.hits[self.path] += 1
            state.auth[self.path] = self.headers.get("Authorization")
            if state.hang.is_set():
                state.released.wait(10)  # hold the request open like a stuck server
                return
            path = self.path
            if not path.startswith(state.prefix + "/"):
                self._send(404, "")
                return
            path = path.removeprefix(state.prefix)
            if path == "/metrics":
                self._send(state.metrics_status, state.metrics)
            elif path.startswith("/metrics/?") and state.short_page is not None:
                self._send(state.metrics_status, _short_page(state, path))
            elif path == "/health":
                self._send(state.health_status, "")
            elif path == "/version":
                self._send(200, json.dumps({"version": state.version}), "application/json")
            elif path == "/v1/models":
                if state.api_key and self.headers.get("Authorization") != f"Bearer {state.api_key}":
                    self._send(401, json.dumps({"error": "Unauthorized"}), "application/json")
                    return
                body = {"object": "list", "data": [state.model]}
                self._send(200, json.dumps(body), "application/json")
            else:
                self._send(404, "")

    return Handler


def _short_page(state: FakeVllm, path: str) -> str:
    if state.short_page == "whole":
        return state.metrics
    if state.short_page == "empty":
        return ""
    names = set(urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)["name[]"])
    return "".join(
        line + "\n"
        for line in state.metrics.splitlines()
        if line and not line.startswith("#") and re.split("[{ ]", line, maxsplit=1)[0] in names
    )


@contextlib.contextmanager
def _serving(
    state: FakeVllm, tls: ssl.SSLContext | None = None, port: int = 0
) -> Iterator[FakeVllm]:
    httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(state))
    httpd.daemon_threads = True
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    scheme = "https" if tls is not None else "http"
    state.url = f"{scheme}://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        state.released.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture
def server() -> Iterator[FakeVllm]:
    with _serving(FakeVllm()) as state:
        yield state


@pytest.fixture
def free_port() -> int:
    return ports.free_port()


@pytest.fixture
def scraper(server: FakeVllm) -> Iterator[Scraper]:
    """A scraper whose reads must answer: a read past its timeout drops its connection and
    is not reachable, so a busy machine is given time (a hang is tested with its own)."""
    scraper = Scraper(server.url, timeout_s=10.0)
    yield scraper
    scraper.close()


def test_a_good_read(server: FakeVllm) -> None:
    scraper = Scraper(server.url)
    try:
        reading = scraper.read_sync()
    finally:
        scraper.close()
    assert reading.reachable and reading.healthy
    assert reading.error is None and not reading.stale
    assert reading.metrics is not None
    assert reading.metrics.generation_tokens_total == 903.0
    assert reading.version == "0.32.0"
    assert reading.served_model == "tiny"
    assert reading.max_model_len == 512
    assert reading.latency_s is not None and reading.latency_s > 0


def test_version_and_models_fetched_once_per_start(server: FakeVllm) -> None:
    scraper = Scraper(server.url)
    for _ in range(3):
        reading = scraper.read_sync()
    scraper.close()
    assert reading.served_model == "tiny"
    assert server.hits["/metrics"] == 3 and server.hits["/health"] == 1
    assert server.hits["/version"] == 1 and server.hits["/v1/models"] == 1


def test_counters_falling_means_a_restart_and_info_is_fetched_again(
    server: FakeVllm,
) -> None:
    scraper = Scraper(server.url)
    server.metrics = "vllm:generation_tokens_total 100.0\n"
    scraper.read_sync()
    server.metrics = "vllm:generation_tokens_total 5.0\n"
    scraper.read_sync()  # sees the reset
    scraper.read_sync()  # asks /version and /v1/models again
    scraper.close()
    assert server.hits["/version"] == 2 and server.hits["/v1/models"] == 2


def test_models_without_the_api_key_is_refused(server: FakeVllm) -> None:
    server.api_key = "sekrit"
    without = Scraper(server.url)
    with_key = Scraper(server.url, api_key="sekrit")
    try:
        refused = without.read_sync()
        allowed = with_key.read_sync()
    finally:
        without.close()
        with_key.close()
    assert refused.reachable and refused.metrics is not None  # /metrics is not guarded
    assert refused.served_model is None
    assert refused.error is not None and "401" in refused.error and "api-key" in refused.error
    assert allowed.served_model == "tiny" and allowed.error is None
    # The key goes to /v1/* only.
    assert server.auth["/v1/models"] == "Bearer sekrit"
    assert server.auth["/metrics"] is None and server.auth["/health"] is None
    assert server.auth["/version"] is None


def test_a_hanging_server_times_out_and_the_last_reading_goes_stale(
    server: FakeVllm,
) -> None:
    scraper = Scraper(server.url, timeout_s=0.3)
    try:
        good = scraper.read_sync()
        server.hang.set()
        hung = scraper.read_sync()
    finally:
        server.released.set()
        scraper.close()
    assert not good.stale
    assert not hung.reachable and hung.stale
    assert hung.error == "timed out after 0.3 s"
    assert hung.metrics == good.metrics
    assert hung.version == "0.32.0"


def test_a_hanging_server_without_history_has_no_metrics(server: FakeVllm) -> None:
    server.hang.set()
    scraper = Scraper(server.url, timeout_s=0.2)
    reading = scraper.read_sync()
    server.released.set()
    scraper.close()
    assert not reading.reachable and not reading.stale and reading.metrics is None
    assert reading.error == "timed out after 0.2 s"
    # The server did not answer /metrics: nothing else was asked (the wait would only double).
    assert server.hits["/metrics"] == 1 and server.hits["/health"] == 0


def test_connection_refused(free_port: int) -> None:
    scraper = Scraper(f"127.0.0.1:{free_port}")
    reading = scraper.read_sync()
    scraper.close()
    assert reading.url == f"http://127.0.0.1:{free_port}"
    assert not reading.reachable and reading.metrics is None
    assert reading.error == "connection refused: is the server running?"


def test_a_url_that_is_not_http_is_a_reading_with_the_reason() -> None:
    scraper = Scraper("ftp://127.0.0.1:21")
    reading = scraper.read_sync()
    assert not reading.reachable and reading.metrics is None
    assert reading.error is not None
    assert reading.error.startswith("request failed: unsupported URL scheme 'ftp'")


def test_dead_engine_is_unhealthy(server: FakeVllm) -> None:
    server.health_status = 503
    scraper = Scraper(server.url)
    reading = scraper.read_sync()
    scraper.close()
    assert reading.reachable and reading.healthy is False
    assert reading.error is not None and "503" in reading.error


def test_a_page_with_no_vllm_metric_is_not_a_vllm_server(server: FakeVllm) -> None:
    """An HTML page or garbage at /metrics (another program on the port) is a reading with
    the reason, never "healthy"."""
    server.metrics = "<html>oops{{{\n\x00\xff"
    scraper = Scraper(server.url)
    reading = scraper.read_sync()
    scraper.close()
    assert reading.reachable and reading.metrics is None
    assert reading.healthy is False
    assert reading.error is not None and "not a vLLM server" in reading.error


def test_an_unreadable_metrics_line_is_skipped_and_logged_once(
    server: FakeVllm, caplog: pytest.LogCaptureFixture
) -> None:
    server.metrics = _page() + 'vllm:num_requests_running{engine="0 1.0\n'
    scraper = Scraper(server.url)
    with caplog.at_level("WARNING", logger="vramtop.sources.scraper"):
        first, second = scraper.read_sync(), scraper.read_sync()
    scraper.close()
    assert first.metrics is not None and first.metrics.skipped_lines == 1
    assert first.metrics.generation_tokens_total is not None  # the rest of the page is read
    assert second.metrics is not None and second.metrics.skipped_lines == 1
    warned = [r.getMessage() for r in caplog.records if "could not be read" in r.getMessage()]
    assert len(warned) == 1 and "1 line(s)" in warned[0]


def test_values_vllm_cannot_report_are_dropped_and_logged_once(
    server: FakeVllm, caplog: pytest.LogCaptureFixture
) -> None:
    repeated = 'vllm:generation_tokens_total{engine="0",model_name="tiny"} 50.0\n'
    server.metrics = (
        repeated
        + repeated
        + 'vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} -3.0\n'
        + 'vllm:num_requests_running{engine="0",model_name="tiny"} -7.0\n'
    )
    scraper = Scraper(server.url)
    with caplog.at_level("WARNING", logger="vramtop.sources.scraper"):
        first, second = scraper.read_sync(), scraper.read_sync()
    scraper.close()
    for reading in (first, second):
        assert reading.metrics is not None
        assert reading.metrics.generation_tokens_total == 50.0  # read once, not 100
        assert reading.metrics.kv_cache_usage is None
        assert reading.metrics.requests_running is None
        assert reading.metrics.dropped_values == 3
    warned = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(warned) == 1 and "3 value(s)" in warned[0]


@pytest.mark.parametrize(
    ("version", "model"),
    [
        ({"x": 1}, {"id": "m\x1b]0;owned\x07", "max_model_len": -5}),
        ("v" * 500, {"id": ["tiny"], "max_model_len": True}),
        ("0.32\n0", {"id": "tiny", "max_model_len": 2**62}),
    ],
)
def test_version_and_model_names_vllm_cannot_give_are_unknown(
    server: FakeVllm, version: object, model: dict[str, object]
) -> None:
    server.version, server.model = version, model
    scraper = Scraper(server.url)
    try:
        reading = scraper.read_sync()
    finally:
        scraper.close()
    assert reading.reachable and reading.metrics is not None
    assert reading.version is None and reading.max_model_len is None
    assert reading.served_model == ("tiny" if model["id"] == "tiny" else None)


def test_an_endless_metrics_body_is_cut_at_the_cap(server: FakeVllm) -> None:
    server.metrics = "vllm:x 1\n" + "#" * (MAX_BODY_BYTES + 10)
    scraper = Scraper(server.url)
    reading = scraper.read_sync()
    scraper.close()
    assert reading.metrics is None and reading.healthy is False
    assert reading.error is not None and "not a vLLM server" in reading.error


def test_a_password_in_the_url_is_never_shown(free_port: int) -> None:
    scraper = Scraper(f"http://me:pw-secret-7@127.0.0.1:{free_port}")
    reading = scraper.read_sync()
    scraper.close()
    assert "pw-secret-7" not in repr(reading) and "127.0.0.1" in reading.url


async def test_read_sync_from_a_thread_worker(server: FakeVllm) -> None:
    scraper = Scraper(server.url)
    try:
        # A thread with no event loop, as Textual's thread workers are.
        reading = await asyncio.to_thread(scraper.read_sync)
        again = await asyncio.to_thread(scraper.read_sync)
    finally:
        scraper.close()
    assert reading.reachable and reading.served_model == "tiny"
    assert reading.metrics is not None and again.metrics == reading.metrics
    assert server.hits["/v1/models"] == 1


def test_a_server_silent_past_the_limit_is_not_answering_until_it_answers(
    server: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung (SIGSTOPped) server: the connection is accepted, nothing answers. Past the
    limit it is unhealthy with the reason; an answer clears it at once."""
    monkeypatch.setattr(scraper_module, "NOT_ANSWERING_S", 0.5)
    scraper = Scraper(server.url, timeout_s=0.2)
    try:
        assert scraper.read_sync().not_answering_s is None
        server.hang.set()
        first = scraper.read_sync()
        assert first.not_answering_s is not None and first.healthy is not False
        later = first
        for _ in range(10):
            later = scraper.read_sync()
            if later.healthy is False:
                break
        assert later.healthy is False and later.not_answering_s is not None
        assert later.not_answering_s >= 0.5
        assert later.error is not None and later.error.startswith("not answering for")
        server.hang.clear()
        server.released.set()
        back = scraper.read_sync()
        assert back.not_answering_s is None and back.healthy is not False
    finally:
        server.released.set()
        scraper.close()


def test_a_refused_connection_is_down_not_silent(free_port: int) -> None:
    scraper = Scraper(f"http://127.0.0.1:{free_port}", timeout_s=0.2)
    assert all(scraper.read_sync().not_answering_s is None for _ in range(3))


def test_read_sync_times_out_then_shows_stale_metrics(server: FakeVllm) -> None:
    scraper = Scraper(server.url, timeout_s=0.3)
    good = scraper.read_sync()
    server.hang.set()
    hung = scraper.read_sync()
    server.released.set()
    scraper.close()
    assert good.reachable and not good.stale
    assert hung.stale and not hung.reachable and hung.metrics == good.metrics
    assert hung.error == "timed out after 0.3 s"


# --- the connection: kept alive, opened again when the server closes it ----------------------


def test_one_connection_serves_every_read(server: FakeVllm, scraper: Scraper) -> None:
    readings = [scraper.read_sync() for _ in range(2 * _HEALTH_EVERY_READS)]
    assert all(r.reachable and r.healthy and r.error is None for r in readings)
    assert sum(server.hits.values()) > len(readings)  # several requests a read, some reads
    assert len(server.peers) == 1


def test_a_read_after_close_opens_a_new_connection(server: FakeVllm, scraper: Scraper) -> None:
    first = scraper.read_sync()
    scraper.close()
    second = scraper.read_sync()
    assert first.reachable and second.reachable and second.error is None
    assert len(server.peers) == 2


@pytest.mark.parametrize(
    ("protocol", "close"),
    [("HTTP/1.0", None), ("HTTP/1.1", "say"), ("HTTP/1.1", "silently")],
    ids=["http-1.0", "connection-close", "closed-without-a-word"],
)
def test_a_server_that_closes_connections_is_read_every_time(
    server: FakeVllm, scraper: Scraper, protocol: str, close: str | None
) -> None:
    server.protocol, server.close = protocol, close
    readings = [scraper.read_sync() for _ in range(2 * _HEALTH_EVERY_READS)]
    for reading in readings:
        assert reading.reachable and reading.healthy and not reading.stale
        assert reading.error is None and reading.metrics is not None
    assert readings[0].served_model == "tiny"
    # Each request on a connection of its own: a closed one was never read from again.
    assert len(server.peers) == sum(server.hits.values())


@pytest.mark.parametrize("part", ["headers", "body"])
def test_a_trickling_server_times_out_within_the_timeout(server: FakeVllm, part: str) -> None:
    """A byte every 0.05 s never lets one receive wait out the socket timeout; the whole
    request must still end at the timeout, while the answer (6 s or more) is still arriving."""
    server.trickle = part
    scraper = Scraper(server.url, timeout_s=0.3)
    reading = scraper.read_sync()
    # Read before anything else: the order of the two events is the assertion, not a time.
    still_arriving = not server.trickled_all.is_set()
    scraper.close()
    assert not reading.reachable and reading.metrics is None
    assert reading.error == "timed out after 0.3 s"
    assert still_arriving, "the read waited for the whole trickled answer, not its timeout"


def test_a_url_with_a_path_asks_under_it(server: FakeVllm) -> None:
    server.prefix = "/prefix"
    scraper = Scraper(server.url + "/prefix/")
    reading = scraper.read_sync()
    scraper.close()
    assert reading.reachable and reading.error is None and reading.metrics is not None
    assert reading.served_model == "tiny"
    assert server.hits["/prefix/metrics"] == 1 and server.hits["/prefix/v1/models"] == 1
    assert server.hits["/metrics"] == 0


@pytest.fixture
def certificate(tmp_path: Path) -> Path:
    """A self-signed certificate for 127.0.0.1 (and its key, beside it), made by openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: no certificate to serve https with")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    made = subprocess.run(
        [
            *(openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        capture_output=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"openssl could not make a certificate: {made.stderr.decode()[-200:]}")
    return cert


def test_an_https_url_is_read_over_tls_with_the_certificate_checked(
    certificate: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(certificate, certificate.with_name("key.pem"))
    with _serving(FakeVllm(), tls) as server:
        untrusted = Scraper(server.url, timeout_s=2)
        refused = untrusted.read_sync()
        untrusted.close()
        # The default context trusts what SSL_CERT_FILE names, as it does the system's CAs.
        monkeypatch.setenv("SSL_CERT_FILE", str(certificate))
        trusted = Scraper(server.url, timeout_s=2)
        reading = trusted.read_sync()
        trusted.close()
    assert not refused.reachable and refused.error is not None
    assert refused.error.startswith(f"cannot connect to {server.url}: ")
    assert "CERTIFICATE_VERIFY_FAILED" in refused.error
    assert reading.reachable and reading.error is None, reading.error
    assert reading.served_model == "tiny" and reading.metrics is not None


# --- /health: asked every few reads while all is well, every read otherwise ------------------


@pytest.fixture
def read(patient: Callable[[], ServerReading]) -> Callable[[], ServerReading]:
    """One read of the fake server, with time to spare on a busy machine: a read that timed
    out asks no /health, and the tests below count the asks (the one that hangs the server
    reads with its own short timeout)."""
    return patient


def _health_asks(server: FakeVllm, read: Callable[[], ServerReading], reads: int) -> int:
    before = server.hits["/health"]
    for _ in range(reads):
        read()
    return server.hits["/health"] - before


def test_health_is_not_asked_every_read_while_all_is_well(
    server: FakeVllm, read: Callable[[], ServerReading]
) -> None:
    readings = [read() for _ in range(2 * _HEALTH_EVERY_READS)]
    assert server.hits["/metrics"] == 2 * _HEALTH_EVERY_READS
    assert server.hits["/health"] == 2  # the first read, then one every _HEALTH_EVERY_READS
    # Between asks the last answer carries over: every reading says healthy, none an error.
    assert all(r.reachable and r.healthy and r.error is None for r in readings)


def test_a_failing_metrics_has_health_asked_on_every_read(
    server: FakeVllm, read: Callable[[], ServerReading]
) -> None:
    read()  # asks /health: the next few reads do not
    server.metrics_status = 500
    failing = read()
    assert failing.error == "/metrics answered HTTP 500" and failing.stale
    assert _health_asks(server, read, 3) == 3
    server.metrics_status = 200
    assert _health_asks(server, read, 1) == 1  # the read after a failure still asks
    assert _health_asks(server, read, _HEALTH_EVERY_READS - 1) == 0  # then all is well


def test_metrics_not_answering_has_health_asked_on_the_next_read(server: FakeVllm) -> None:
    scraper = Scraper(server.url, timeout_s=0.3)
    read = scraper.read_sync
    read()
    server.hang.set()
    hung = read()
    server.released.set()
    server.hang.clear()
    assert not hung.reachable and hung.error == "timed out after 0.3 s"
    assert hung.healthy is None  # no health carried over a server that did not answer
    before = server.hits["/health"]
    again = read()
    scraper.close()
    assert server.hits["/health"] == before + 1
    assert again.reachable and again.healthy and not again.stale


def test_an_engine_answering_503_is_reported_and_health_asked_every_read(
    server: FakeVllm, read: Callable[[], ServerReading]
) -> None:
    server.health_status = 503
    readings = [read() for _ in range(3)]
    assert server.hits["/health"] == 3
    for reading in readings:
        assert reading.reachable and reading.healthy is False
        assert reading.error == "/health answered HTTP 503: the engine is not serving"
        assert reading.metrics is not None and not reading.stale


def test_an_engine_dying_is_reported_within_a_few_reads(
    server: FakeVllm, read: Callable[[], ServerReading]
) -> None:
    read()
    server.health_status = 503
    readings = [read() for _ in range(_HEALTH_EVERY_READS)]
    assert readings[-1].healthy is False and "503" in (readings[-1].error or "")
    assert _health_asks(server, read, 2) == 2  # unhealthy: asked every read
    server.health_status = 200
    assert read().healthy is True
    assert _health_asks(server, read, _HEALTH_EVERY_READS - 1) == 0


@pytest.fixture
def patient(server: FakeVllm) -> Iterator[Callable[[], ServerReading]]:
    """Reads of the fake server with time to spare on a busy machine (no timeout is under
    test here)."""
    scraper = Scraper(server.url, timeout_s=10.0)
    yield scraper.read_sync
    scraper.close()


def test_a_server_that_keeps_to_the_names_asked_is_asked_for_the_samples_read_alone(
    server: FakeVllm, patient: Callable[[], ServerReading]
) -> None:
    """The whole page once, to compare the short page with; the short page from then on,
    read as the whole one reads."""
    server.short_page = "kept"
    readings = [patient() for _ in range(4)]
    assert server.hits[WHOLE_PAGE] == 1 and server.hits[SHORT_PAGE] == 4
    for reading in readings:
        assert reading.metrics == parse_metrics(server.metrics) and not reading.stale
        assert reading.healthy and reading.error is None


@pytest.mark.parametrize("short_page", ["whole", "empty", None])
def test_a_server_that_does_not_keep_to_the_names_is_asked_for_the_whole_page(
    server: FakeVllm, patient: Callable[[], ServerReading], short_page: str | None
) -> None:
    """The query ignored, a page with nothing on it, or a 404: tried once, then the whole
    page on every read."""
    server.short_page = short_page
    readings = [patient() for _ in range(4)]
    assert server.hits[SHORT_PAGE] == 1 and server.hits[WHOLE_PAGE] == 4
    for reading in readings:
        assert reading.metrics == parse_metrics(server.metrics) and reading.error is None


def test_a_server_that_spells_a_sample_otherwise_is_read_whole(
    server: FakeVllm, patient: Callable[[], ServerReading]
) -> None:
    """The short page asks for each sample as a Prometheus client writes it (a counter with
    `_total`): a server that writes one otherwise gives a short page without it."""
    server.short_page = "kept"
    server.metrics = "vllm:generation_tokens 100.0\nvllm:num_requests_running 1.0\n"
    readings = [patient() for _ in range(3)]
    assert [r.metrics.generation_tokens_total if r.metrics else None for r in readings] == [
        100.0
    ] * 3
    assert server.hits[SHORT_PAGE] == 1 and server.hits[WHOLE_PAGE] == 3


def test_a_short_page_that_lacks_what_the_server_gave_is_read_whole_from_then_on(
    server: FakeVllm, patient: Callable[[], ServerReading]
) -> None:
    server.short_page = "kept"
    patient(), patient()
    server.short_page = "empty"  # e.g. another server behind the same address
    lacking = patient()
    assert lacking.metrics == parse_metrics(server.metrics) and not lacking.stale
    patient()
    assert server.hits[SHORT_PAGE] == 3 and server.hits[WHOLE_PAGE] == 3


def test_a_series_new_on_the_server_is_read_from_the_short_page_too(
    server: FakeVllm, patient: Callable[[], ServerReading]
) -> None:
    """A short page with other series than before is compared with the whole page again:
    a new engine's lines count, and the short page goes on serving."""
    server.short_page = "kept"
    server.metrics = 'vllm:num_requests_running{engine="0"} 2.0\n'
    assert _running(patient()) == 2.0
    server.metrics += 'vllm:num_requests_running{engine="1"} 3.0\n'
    assert _running(patient()) == 5.0  # judged again against the whole page
    assert _running(patient()) == 5.0
    assert server.hits[WHOLE_PAGE] == 2 and server.hits[SHORT_PAGE] == 3


def test_a_restarted_server_has_its_short_page_tried_again(
    server: FakeVllm, patient: Callable[[], ServerReading]
) -> None:
    server.metrics = "vllm:generation_tokens_total 100.0\n"
    patient(), patient()  # the short page is a 404 here: the whole page is asked
    assert server.hits[SHORT_PAGE] == 1
    server.short_page = "kept"
    server.metrics = "vllm:generation_tokens_total 5.0\n"  # a new start (counters fell)
    patient(), patient(), patient()
    assert server.hits[SHORT_PAGE] == 3 and server.hits[WHOLE_PAGE] == 4


def test_a_server_gone_and_back_has_its_short_page_tried_again() -> None:
    """Nothing answers at the address for a while, then a server that keeps to the names
    does: it is another server, its short page is tried."""
    first = FakeVllm()
    with _serving(first):
        scraper = Scraper(first.url, timeout_s=10.0)
        scraper.read_sync()  # the short page is a 404 here
    scraper.close()  # (the server's thread would serve the kept-alive connection on)
    port = int(first.url.rsplit(":", 1)[1])
    try:
        assert not scraper.read_sync().reachable  # refused
        with _serving(FakeVllm(short_page="kept"), port=port) as second:
            back = scraper.read_sync()
            scraper.read_sync()
    finally:
        scraper.close()
    assert back.reachable and back.metrics == parse_metrics(second.metrics)
    assert second.hits[SHORT_PAGE] == 2 and second.hits[WHOLE_PAGE] == 1


def _running(reading: ServerReading) -> float | None:
    return reading.metrics.requests_running if reading.metrics else None
