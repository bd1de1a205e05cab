"""Holding, draining, releasing and failing, as the supervisor drives them during a restart."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.frontdoor.upstreams import upstream, upstream_server
from tests.support import http
from tests.support.ports import free_port
from tests.support.waiting import PROCESS_S, stays, wait_until
from vramtop.frontdoor import protocol
from vramtop.frontdoor.web_app import MAX_CONTROL_BYTES

pytestmark = pytest.mark.timeout(180)

BODY = {"prompt": "hello world", "max_tokens": 20, "stream": True}


class Client(threading.Thread):
    """One streamed completion on a thread; keeps the status, the body and any error."""

    def __init__(self, url: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.body = body or BODY
        self.status: int | None = None
        self.headers: httpx.Headers | None = None
        self.content = b""
        self.error: str | None = None
        # Its answer has begun (a first chunk came): the door lets a begun stream finish,
        # and sends one not begun again to the server after a hold.
        self.begun = threading.Event()

    def run(self) -> None:
        try:
            with (
                httpx.Client(timeout=120) as client,
                client.stream("POST", self.url + "/v1/completions", json=self.body) as resp,
            ):
                self.status = resp.status_code
                self.headers = resp.headers
                for chunk in resp.iter_raw():
                    self.content += chunk
                    self.begun.set()
        except httpx.HTTPError as exc:
            self.error = repr(exc)


def wait_for(check: Any, timeout_s: float = PROCESS_S) -> Any:
    return wait_until(check, deadline_s=timeout_s, what="the check (see the line above)")


def test_held_requests_wait_and_go_to_the_new_upstream(
    machine: Any, server_factory: Any, door_factory: Any
) -> None:
    old = server_factory(machine, 0.93)
    assert old.wait_ready()
    door = door_factory(old.url)
    answer = door.post(protocol.HOLD_ROUTE, {"drain_s": 5})
    assert answer.status_code == 200
    body = answer.json()
    # Nothing to drain; how long its two readings of the clock were apart is not asserted (a
    # busy machine can put a millisecond between them).
    assert body.pop("drain_took_s") >= 0
    assert body == {"drained": True, "in_flight": 0, "replayed": 0, "drained_requests": 0}
    clients = [Client(door.url) for _ in range(3)]
    for c in clients:
        c.start()
    assert wait_for(lambda: door.status()["held"] == 3)
    # The old server goes; the new one starts on another port while the clients wait.
    old.kill_group()
    new = server_factory(machine, 0.93)
    assert new.wait_ready()
    stays(
        lambda: all(c.status is None and c.is_alive() for c in clients),
        for_s=0.3,
        what="the clients held while the new server is up",
    )
    answer = door.post(protocol.RELEASE_ROUTE, {"upstream": new.url})
    assert answer.json() == {"released": 3}
    for c in clients:
        c.join(60)
    assert [(c.status, c.error) for c in clients] == [(200, None)] * 3
    assert all(c.content.endswith(b"data: [DONE]\n\n") for c in clients)
    status = door.status()
    assert status["upstream"] == new.url and status["holding"] is False
    assert (status["served"], status["failed"], status["held"]) == (3, 0, 0)
    assert status["longest_hold_s"] >= 0.3
    assert status["held_total"] == 3
    assert status["first_served_s"] is not None and status["first_served_s"] >= 0


@pytest.mark.slow
def test_hold_drains_the_requests_in_flight_first(sim_server: Any, door_factory: Any) -> None:
    door = door_factory(sim_server.url)
    # About 20 s at the simulated rate: the hold below must find it still streaming, and the
    # 2 s of 150 tokens ran out first on a busy machine (the hold then found nothing in flight).
    long = Client(door.url, {**BODY, "max_tokens": 1500})
    long.start()
    assert long.begun.wait(PROCESS_S)
    assert wait_for(lambda: door.status()["in_flight"] == 1)
    short = door.post(protocol.HOLD_ROUTE, {"drain_s": 0.2}).json()
    assert (short["drained"], short["in_flight"], short["replayed"]) == (False, 1, 0)
    assert short["drain_took_s"] >= 0.2
    assert short["drained_requests"] == 1  # the stream begun, let finish
    drained = door.post(protocol.HOLD_ROUTE, {"drain_s": 60}).json()
    assert (drained["drained"], drained["in_flight"], drained["replayed"]) == (True, 0, 0)
    # The hold answered once the stream had ended whole, not before.
    long.join(5)
    assert long.status == 200 and long.content.endswith(b"data: [DONE]\n\n")
    assert door.status()["holding"] is True


def test_a_request_held_too_long_gets_a_503_it_can_read(door_factory: Any) -> None:
    with upstream() as url:
        door = door_factory(url, "--hold-s", "1")
        door.post(protocol.HOLD_ROUTE, {"drain_s": 1})
        resp = http.post(door.url + "/v1/completions", json=BODY, timeout=30)
        assert resp.status_code == 503
        assert resp.headers["retry-after"] == "30"
        assert resp.json() == {
            "error": {
                "message": "vramtop's front door held this request for 1 s while vLLM "
                "restarted, and vLLM is not serving yet",
                "type": "server_restarting",
                "param": None,
                "code": 503,
            }
        }
        status = door.status()
        assert (status["held"], status["failed"]) == (0, 1)
        assert status["longest_hold_s"] >= 1.0


def test_fail_answers_every_held_request_at_once(door_factory: Any) -> None:
    with upstream() as url:
        door = door_factory(url)
        door.post(protocol.HOLD_ROUTE, {"drain_s": 1})
        clients = [Client(door.url) for _ in range(2)]
        for c in clients:
            c.start()
        assert wait_for(lambda: door.status()["held"] == 2)
        answer = door.post(protocol.FAIL_ROUTE, {"reason": "vLLM exited with code 1"})
        assert answer.json() == {"failed": 2}
        for c in clients:
            c.join(10)
            assert c.status == 503 and c.headers is not None
            assert c.headers["retry-after"] == "30"
            error = json.loads(c.content)["error"]
            assert error["type"] == "server_restarting"
            # Answered by the failure said (its reason), not at the end of the 600 s a
            # request is held: the join's deadline is far short of that.
            assert error["message"].endswith("did not start again: vLLM exited with code 1")
        # Holding ended: a new request is forwarded again.
        assert door.status()["holding"] is False
        assert http.get(door.url + "/echo").status_code == 200


def test_control_routes_need_the_token(door_factory: Any) -> None:
    with upstream() as url:
        door = door_factory(url)
        for token in ("", "wrong"):
            for route in (protocol.HOLD_ROUTE, protocol.RELEASE_ROUTE, protocol.FAIL_ROUTE):
                resp = door.post(route, {}, token=token)
                assert resp.status_code == 403, (route, token)
                assert resp.json()["error"]["type"] == "forbidden"
        assert door.status()["holding"] is False
        # Reading needs none.
        assert http.get(door.url + protocol.PREFIX).status_code == 200
        assert door.post(protocol.RELEASE_ROUTE, {}).json() == {"released": 0}
        untokened = door_factory(url, token=None)
        resp = untokened.post(protocol.HOLD_ROUTE, {}, token="anything")
        assert resp.status_code == 403 and "--token-file" in resp.json()["error"]["message"]
        assert "door-test-token" not in door.text()


@pytest.mark.parametrize(
    ("route", "body"),
    [
        (protocol.HOLD_ROUTE, {"drain_s": "soon"}),
        (protocol.HOLD_ROUTE, {"drain_s": -1}),
        (protocol.RELEASE_ROUTE, {"upstream": "ftp://127.0.0.1:1"}),
        (protocol.RELEASE_ROUTE, {"upstream": 8000}),
        (protocol.FAIL_ROUTE, {"reason": 5}),
    ],
)
def test_a_bad_control_body_is_a_400(door_factory: Any, route: str, body: Any) -> None:
    door = door_factory(f"http://127.0.0.1:{free_port()}")
    resp = door.post(route, body)
    assert resp.status_code == 400 and resp.json()["error"]["type"] == "bad_request"
    bad_json = http.post(
        door.url + route, content=b"{nope", headers={protocol.TOKEN_HEADER: door.token}
    )
    assert bad_json.status_code == 400


def test_a_door_without_upstream_holds_until_released(sim_server: Any, door_factory: Any) -> None:
    door = door_factory(None)
    assert door.status()["holding"] is True and door.status()["upstream"] is None
    client = Client(door.url)
    client.start()
    assert wait_for(lambda: door.status()["held"] == 1)
    assert door.post(protocol.RELEASE_ROUTE, {}).status_code == 400  # nowhere to send it
    assert door.post(protocol.RELEASE_ROUTE, {"upstream": sim_server.url}).json() == {"released": 1}
    client.join(30)
    assert client.status == 200 and client.content.endswith(b"data: [DONE]\n\n")


def test_sigterm_lets_the_stream_finish_and_answers_the_held(door_factory: Any) -> None:
    # The stream runs until the test ends it (a simulated one of 80 tokens lasted about a
    # second, which a busy machine's first look at the door could miss); the grace is long
    # enough that it is the test, not the clock, that ends it.
    with upstream_server(slow="stream") as server:
        door = door_factory(f"http://127.0.0.1:{server.server_address[1]}", "--stop-grace-s", "60")
        streaming = Client(door.url)
        streaming.start()
        assert streaming.begun.wait(PROCESS_S)
        assert wait_for(lambda: door.status()["in_flight"] == 1)
        # A second client arrives while the door holds (the stream still runs).
        threading.Thread(
            target=door.post, args=(protocol.HOLD_ROUTE, {"drain_s": 60}), daemon=True
        ).start()
        assert wait_for(lambda: door.status()["holding"])
        held = Client(door.url)
        held.start()
        assert wait_for(lambda: door.status()["held"] == 1)
        door.proc.send_signal(signal.SIGTERM)
        held.join(PROCESS_S)
        assert held.status == 503
        assert json.loads(held.content)["error"]["type"] == "server_restarting"
        # The held one answered at once; the stream begun is still let run.
        assert door.proc.poll() is None and not streaming.content.endswith(b"data: [DONE]\n\n")
        server.finish_now.set()  # type: ignore[attr-defined]
        assert door.proc.wait(PROCESS_S) == 0
        streaming.join(PROCESS_S)
        assert streaming.status == 200 and streaming.content.endswith(b"data: [DONE]\n\n")


def test_the_stats_file_is_private_and_follows(
    sim_server: Any, door_factory: Any, tmp_path: Path
) -> None:
    stats = tmp_path / "door-stats.json"
    door = door_factory(sim_server.url, "--stats-file", str(stats))
    for _ in range(3):
        c = Client(door.url)
        c.start()
        c.join(30)
        assert c.status == 200
    assert wait_for(lambda: stats.exists() and json.loads(stats.read_text())["served"] == 3, 5)
    written = json.loads(stats.read_text())
    assert written["pid"] == door.proc.pid
    assert written["e2e_p50_s"] is not None and written["decode_tps_p50"] is not None
    assert stat.S_IMODE(os.stat(stats).st_mode) == 0o600
    assert set(door.status()) >= {
        "upstream", "holding", "in_flight", "held", "served", "failed", "longest_hold_s",
        "ttft_p50_s", "ttft_p95_s", "e2e_p50_s", "e2e_p95_s", "decode_tps_p50", "pid", "started",
    }  # fmt: skip


def test_a_client_gone_while_held_is_not_forwarded(door_factory: Any) -> None:
    with upstream() as url:
        door = door_factory(url)
        door.post(protocol.HOLD_ROUTE, {"drain_s": 1})
        with socket.create_connection(("127.0.0.1", door.port)) as sock:
            sock.sendall(b"GET /echo?gone=1 HTTP/1.1\r\nHost: door\r\n\r\n")
            assert wait_for(lambda: door.status()["held"] == 1)
        assert door.post(protocol.RELEASE_ROUTE, {}).json() == {"released": 1}
        assert wait_for(lambda: door.status()["abandoned"] == 1)
        status = door.status()
        assert (status["in_flight"], status["served"], status["failed"]) == (0, 0, 0)
        # The upstream never saw it; the next request goes through.
        assert http.get(door.url + "/echo?next=1").status_code == 200
        assert http.get(url + "/seen").json() == [["GET", "/echo?next=1"], ["GET", "/seen"]]


def test_a_control_body_nested_too_deeply_is_answered_400(door_factory: Any) -> None:
    # Deeper than the JSON parser recurses (its limit is about a thousand levels), yet within
    # the size a control body may have: not JSON, as any other damaged body.
    door = door_factory(None)
    depth = MAX_CONTROL_BYTES - 1
    answer = http.post(
        door.url + protocol.PREFIX + "/hold",
        content=b"[" * depth,
        headers={protocol.TOKEN_HEADER: door.token, "content-type": "application/json"},
        timeout=10,
    )
    assert answer.status_code == 400
    assert json.loads(answer.text)["error"]["message"] == "the body is not JSON"
    assert door.proc.poll() is None
