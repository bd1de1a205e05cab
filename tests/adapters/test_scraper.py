"""The scraper against a real HTTP server on localhost (http.server in a thread)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from vramtop.core.model import ServerReading
from vramtop.sources.scraper import _HEALTH_EVERY_READS, Scraper

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
    url: str = ""


def _handler(state: FakeVllm) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep test output quiet
            pass

        def _send(self, status: int, body: str, kind: str = "text/plain") -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            state.hits[self.path] += 1
            if state.hang.is_set():
                state.released.wait(10)  # hold the request open like a stuck server
                return
            if self.path == "/metrics":
                self._send(state.metrics_status, state.metrics)
            elif self.path == "/health":
                self._send(state.health_status, "")
            elif self.path == "/version":
                self._send(200, json.dumps({"version": "0.32.0"}), "application/json")
            elif self.path == "/v1/models":
                if state.api_key and self.headers.get("Authorization") != f"Bearer {state.api_key}":
                    self._send(401, json.dumps({"error": "Unauthorized"}), "application/json")
                    return
                body = {"object": "list", "data": [{"id": "tiny", "max_model_len": 512}]}
                self._send(200, json.dumps(body), "application/json")
            else:
                self._send(404, "")

    return Handler


@pytest.fixture
def server() -> Iterator[FakeVllm]:
    state = FakeVllm()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        state.released.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_good_read(server: FakeVllm) -> None:
    scraper = Scraper(server.url)
    try:
        reading = await scraper.read()
    finally:
        await scraper.aclose()
    assert reading.reachable and reading.healthy
    assert reading.error is None and not reading.stale
    assert reading.metrics is not None
    assert reading.metrics.generation_tokens_total == 903.0
    assert reading.version == "0.32.0"
    assert reading.served_model == "tiny"
    assert reading.max_model_len == 512
    assert reading.latency_s is not None and reading.latency_s > 0


async def test_version_and_models_fetched_once_per_start(server: FakeVllm) -> None:
    scraper = Scraper(server.url)
    async with httpx.AsyncClient() as client:
        for _ in range(3):
            reading = await scraper.read(client)
    assert reading.served_model == "tiny"
    assert server.hits["/metrics"] == 3 and server.hits["/health"] == 1
    assert server.hits["/version"] == 1 and server.hits["/v1/models"] == 1


async def test_counters_falling_means_a_restart_and_info_is_fetched_again(
    server: FakeVllm,
) -> None:
    scraper = Scraper(server.url)
    server.metrics = "vllm:generation_tokens_total 100.0\n"
    await scraper.read()
    server.metrics = "vllm:generation_tokens_total 5.0\n"
    await scraper.read()  # sees the reset
    await scraper.read()  # asks /version and /v1/models again
    await scraper.aclose()
    assert server.hits["/version"] == 2 and server.hits["/v1/models"] == 2


async def test_models_without_the_api_key_is_refused(server: FakeVllm) -> None:
    server.api_key = "sekrit"
    without = Scraper(server.url)
    with_key = Scraper(server.url, api_key="sekrit")
    try:
        refused = await without.read()
        allowed = await with_key.read()
    finally:
        await without.aclose()
        await with_key.aclose()
    assert refused.reachable and refused.metrics is not None  # /metrics is not guarded
    assert refused.served_model is None
    assert refused.error is not None and "401" in refused.error and "api-key" in refused.error
    assert allowed.served_model == "tiny" and allowed.error is None


async def test_a_hanging_server_times_out_and_the_last_reading_goes_stale(
    server: FakeVllm,
) -> None:
    scraper = Scraper(server.url, timeout_s=0.3)
    try:
        good = await scraper.read()
        server.hang.set()
        hung = await scraper.read()
    finally:
        server.released.set()
        await scraper.aclose()
    assert not good.stale
    assert not hung.reachable and hung.stale
    assert hung.error == "timed out after 0.3 s"
    assert hung.metrics == good.metrics
    assert hung.version == "0.32.0"


async def test_a_hanging_server_without_history_has_no_metrics(server: FakeVllm) -> None:
    server.hang.set()
    scraper = Scraper(server.url, timeout_s=0.2)
    reading = await scraper.read()
    server.released.set()
    await scraper.aclose()
    assert not reading.reachable and not reading.stale and reading.metrics is None
    assert reading.error == "timed out after 0.2 s"


async def test_connection_refused(free_port: int) -> None:
    scraper = Scraper(f"127.0.0.1:{free_port}")
    reading = await scraper.read()
    await scraper.aclose()
    assert reading.url == f"http://127.0.0.1:{free_port}"
    assert not reading.reachable and reading.metrics is None
    assert reading.error == "connection refused: is the server running?"


async def test_dead_engine_is_unhealthy(server: FakeVllm) -> None:
    server.health_status = 503
    scraper = Scraper(server.url)
    reading = await scraper.read()
    await scraper.aclose()
    assert reading.reachable and reading.healthy is False
    assert reading.error is not None and "503" in reading.error


async def test_a_garbage_metrics_page_is_a_reading_not_an_error(server: FakeVllm) -> None:
    server.metrics = "<html>oops{{{\n\x00"
    scraper = Scraper(server.url)
    reading = await scraper.read()
    await scraper.aclose()
    assert reading.reachable and reading.metrics is not None
    assert reading.metrics.generation_tokens_total is None


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


# --- /health: asked every few reads while all is well, every read otherwise ------------------


@pytest.fixture(params=["sync", "async"])
def read(request: pytest.FixtureRequest, server: FakeVllm) -> Iterator[Callable[[], ServerReading]]:
    """One read of the fake server, through `read_sync` or through `read` on a loop of its
    own: both must make the same choice of what to ask."""
    scraper = Scraper(server.url, timeout_s=0.3)
    if request.param == "sync":
        yield scraper.read_sync
        scraper.close()
        return
    loop = asyncio.new_event_loop()
    yield lambda: loop.run_until_complete(scraper.read())
    loop.run_until_complete(scraper.aclose())
    loop.close()


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


def test_metrics_not_answering_has_health_asked_on_the_next_read(
    server: FakeVllm, read: Callable[[], ServerReading]
) -> None:
    read()
    server.hang.set()
    hung = read()
    server.released.set()
    server.hang.clear()
    assert not hung.reachable and hung.error == "timed out after 0.3 s"
    assert hung.healthy is None  # no health carried over a server that did not answer
    before = server.hits["/health"]
    again = read()
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
