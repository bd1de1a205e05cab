"""The exporter's HTTP server: idle connections cost no thread, are closed after the idle
timeout, and never keep a scraper out."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Gauge

from tests.export.test_exporter import CARD
from tests.support import http
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.core.model import Sample
from vramtop.export.exporter import Exporter
from vramtop.export.http_server import MAX_HEAD_BYTES, WORKERS, MetricsServer
from vramtop.machines.interface import Frame


def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Gauge("probe_value", "a value", registry=reg).set(7)
    return reg


@contextmanager
def serving(reg: CollectorRegistry, **options: float) -> Iterator[MetricsServer]:
    server = MetricsServer("127.0.0.1", 0, reg, **options)  # type: ignore[arg-type]
    server.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def idle(port: int, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]


def wait_for(condition, timeout_s: float = PROCESS_S) -> None:  # type: ignore[no-untyped-def]
    wait_until(condition, deadline_s=timeout_s, what="the condition")


def test_idle_connections_hold_no_thread_and_a_scrape_still_answers() -> None:
    before = threading.active_count()
    with serving(registry()) as server:
        sockets = idle(server.server_port, 200)
        try:
            wait_for(lambda: server.open_connections == min(200, 64))
            during = threading.active_count()
            answer = http.get(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10)
        finally:
            for sock in sockets:
                sock.close()
    print(f"threads: {before} before, {during} with 200 idle sockets")
    # The accepting thread and at most the workers, whatever the number of sockets.
    assert during <= before + 1 + WORKERS
    assert answer.status_code == 200 and "probe_value 7.0" in answer.text


def test_an_idle_connection_is_closed_after_the_idle_timeout() -> None:
    with serving(registry(), idle_timeout_s=0.3) as server:
        (sock,) = idle(server.server_port, 1)
        with sock:
            assert sock.recv(1) == b""  # the server closed it (recv waits up to 10 s)
        assert server.open_connections == 0


def test_past_the_limit_the_longest_idle_connection_makes_room_for_a_scrape() -> None:
    with serving(registry(), max_connections=8) as server:
        sockets = idle(server.server_port, 20)
        try:
            wait_for(lambda: server.open_connections == 8)
            assert sockets[0].recv(1) == b""  # the first one opened was closed
            answer = http.get(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10)
        finally:
            for sock in sockets:
                sock.close()
    assert answer.status_code == 200


def test_a_scrape_is_answered_while_clients_send_half_a_request() -> None:
    # Each sends the first line of a request and never the rest; the server waits for them
    # far longer than the scrape's deadline, so only a scrape answered beside them passes.
    with serving(registry(), idle_timeout_s=600) as server:
        sockets = idle(server.server_port, 50)
        try:
            for sock in sockets:
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            answer = http.get(f"http://127.0.0.1:{server.server_port}/metrics", timeout=30)
        finally:
            for sock in sockets:
                sock.close()
    assert answer.status_code == 200 and "probe_value 7.0" in answer.text


def test_a_request_head_past_the_limit_is_closed() -> None:
    with serving(registry(), idle_timeout_s=600) as server:
        (sock,) = idle(server.server_port, 1)
        with sock:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nX-Long: " + b"a" * (MAX_HEAD_BYTES + 10))
            assert sock.recv(1) == b""  # closed, not answered nor kept
        wait_for(lambda: server.open_connections == 0)


class OneSample:
    session = None  # a source that keeps no live session
    profile_name = None  # nor a profile (no timeline of steps)

    def tick(self, log_limit: int = 0) -> Frame:
        return Frame(Sample(t=1.0, gpu=CARD))

    def close(self, stop_server: bool) -> None:
        pass


def test_the_exporter_serves_its_own_process_metrics() -> None:
    exporter = Exporter(OneSample())
    exporter.sample_once()
    with serving(exporter.registry()) as server:
        text = http.get(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10).text
    for name in (
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
    ):
        assert f"\n{name} " in text, name
    assert "vramtop_samples_total 1.0" in text
