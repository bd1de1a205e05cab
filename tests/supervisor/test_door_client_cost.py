"""The front door's control is plain http on loopback: asking it builds no TLS settings,
and its report, asked again and again, keeps its connection.

Building them loads the CA bundle (some 25 ms of CPU a client). The console's housekeeping
looks at the door every few seconds (`release_stale_hold`), and that load was the largest
part of the console's own CPU on the demo. The real calls, watched (tests/support/calls.py),
against a door of our own that answers as the front door does."""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.support.calls import calls_into
from vramtop.frontdoor.protocol import PREFIX as CONTROL
from vramtop.supervisor import door
from vramtop.supervisor.state import Lifecycle, ServerRecord


class _Door(BaseHTTPRequestHandler):
    """Answers the door's report and its control POSTs as the front door does, keeping the
    connection open for the next request (HTTP/1.1) unless `closing`."""

    protocol_version = "HTTP/1.1"
    closing = False

    def _answer(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.closing:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer({"holding": True, "held": 2} if self.path == CONTROL else {})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer({"released": 2})

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def fake_door(monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerRecord]:
    monkeypatch.setattr(_Door, "closing", False)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Door)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    try:
        yield ServerRecord(
            profile="doorcost",
            state=Lifecycle.RUNNING,
            front_door=f"127.0.0.1:{port}",
            internal_port=port + 1,
        )
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_doors_report_is_read_without_tls_settings(fake_door: ServerRecord) -> None:
    report, built = calls_into(ssl.create_default_context, lambda: door.info(fake_door))
    assert report == {"holding": True, "held": 2}
    assert built == 0


def test_a_control_call_to_the_door_builds_no_tls_settings(fake_door: ServerRecord) -> None:
    door.token(fake_door.profile)  # the token file the control calls send
    released, built = calls_into(ssl.create_default_context, lambda: door.release(fake_door))
    assert released == 2
    assert built == 0


def test_the_doors_report_asked_again_keeps_its_connection(fake_door: ServerRecord) -> None:
    """The housekeeping's look every few seconds: one connection, not one a look."""
    reports, connections = calls_into(
        socket.create_connection, lambda: [door.info(fake_door) for _ in range(3)]
    )
    assert reports == [{"holding": True, "held": 2}] * 3
    assert connections <= 1


def test_a_connection_the_door_closed_is_not_used_again(fake_door: ServerRecord) -> None:
    _Door.closing = True  # (set back by the fixture)
    assert door.info(fake_door) == {"holding": True, "held": 2}
    reports, connections = calls_into(
        socket.create_connection, lambda: [door.info(fake_door) for _ in range(2)]
    )
    assert reports == [{"holding": True, "held": 2}] * 2
    assert connections == 2
