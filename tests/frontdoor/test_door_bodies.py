"""Request bodies: one over the limit is a 413, the bodies kept in memory stay within the
door's budget, and the others stream through whole, also after a hold."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.frontdoor.test_door_holding import wait_for
from tests.frontdoor.upstreams import upstream, upstream_server
from tests.support import http
from vramtop.frontdoor import protocol

pytestmark = pytest.mark.timeout(120)

MIB = 1024 * 1024


class Post(threading.Thread):
    """One POST of `body` (to /body) on a thread; keeps the answer."""

    def __init__(self, url: str, body: bytes, path: str = "/body") -> None:
        super().__init__(daemon=True)
        self.url, self.body, self.path = url, body, path
        self.answer: httpx.Response | None = None

    def run(self) -> None:
        self.answer = http.post(self.url + self.path, content=self.body, timeout=60)


def assert_413(answer: httpx.Response) -> None:
    assert answer.status_code == 413
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["code"]) == ("request_too_large", 413)
    assert "1 MiB" in error["message"] and "--max-body-mib" in error["message"]


def test_a_body_over_the_limit_is_a_413_and_not_forwarded(door_factory: Any) -> None:
    with upstream() as url:
        door = door_factory(url, "--max-body-mib", "1")
        assert_413(http.post(door.url + "/body", content=b"x" * (MIB + 1), timeout=60))
        assert http.get(url + "/seen").json() == [["GET", "/seen"]]
        assert door.status()["failed"] == 1
        ok = http.post(door.url + "/body", content=b"x" * MIB, timeout=60)
        assert ok.status_code == 200 and len(ok.content) == MIB


def test_a_chunked_body_over_the_limit_is_a_413(door_factory: Any) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(4):
            yield b"y" * (MIB // 2)

    with upstream() as url:
        door = door_factory(url, "--max-body-mib", "1")
        assert_413(http.post(door.url + "/body", content=chunks(), timeout=60))
        # One under the limit, chunked too, goes through whole.
        small = http.post(door.url + "/body", content=iter([b"a" * 1000, b"b" * 1000]))
        assert small.status_code == 200 and small.content == b"a" * 1000 + b"b" * 1000
        assert door.status()["in_flight"] == 0


def test_held_bodies_are_kept_within_the_budget_and_the_rest_stream(door_factory: Any) -> None:
    kept, streamed = b"k" * (MIB // 2), bytes(range(256)) * (3 * MIB // 256)
    with upstream() as url:
        door = door_factory(url, "--body-memory-mib", "1")
        door.post(protocol.HOLD_ROUTE, {"drain_s": 1})
        first = Post(door.url, kept)
        first.start()
        assert wait_for(lambda: door.status()["held"] == 1)
        assert door.status()["bodies_kept_bytes"] == len(kept)
        # 3 MiB does not fit in what is left of 1 MiB: it waits in its connection, unread.
        second = Post(door.url, streamed)
        second.start()
        assert wait_for(lambda: door.status()["held"] == 2)
        assert door.status()["bodies_kept_bytes"] == len(kept)
        assert door.post(protocol.RELEASE_ROUTE, {}).json() == {"released": 2}
        first.join(60)
        second.join(60)
        assert first.answer is not None and first.answer.content == kept
        assert second.answer is not None and second.answer.content == streamed
        status = door.status()
        assert (status["served"], status["failed"], status["bodies_kept_bytes"]) == (2, 0, 0)


def test_a_streamed_body_goes_through_whole(door_factory: Any) -> None:
    body = bytes(range(256)) * (8 * MIB // 256)
    with upstream() as url:
        door = door_factory(url, "--body-memory-mib", "0")
        answer = http.post(door.url + "/body", content=body, timeout=60)
        assert answer.status_code == 200 and answer.content == body
        assert json.loads(http.get(url + "/seen").content)[0] == ["POST", "/body"]


@pytest.mark.parametrize("value", ["-1", "lots", "nan", "2e9"])
def test_a_bad_body_size_is_refused(value: str) -> None:
    from tests.frontdoor.test_door_cli import refused

    for option in ("--max-body-mib", "--body-memory-mib"):
        done = refused("--listen", "127.0.0.1:1", option, value)
        assert done.returncode == 2 and "MiB" in done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("kept", [True, False])
def test_a_request_vllm_drops_while_holding_is_sent_again_only_when_kept(
    door_factory: Any, kept: bool
) -> None:
    body = b"p" * (MIB // 4)
    with upstream_server() as server:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        door = door_factory(url, "--body-memory-mib", "1" if kept else "0")
        client = Post(door.url, body, "/drop-once")
        client.start()
        assert wait_for(lambda: ["POST", "/drop-once"] in http.get(url + "/seen").json())
        # A restart begins: the door holds, then vLLM goes away before answering.
        assert door.post(protocol.HOLD_ROUTE, {"drain_s": 0}).json()["drained"] is False
        server.drop_now.set()  # type: ignore[attr-defined]
        if kept:
            assert wait_for(lambda: door.status()["held"] == 1)
            assert door.post(protocol.RELEASE_ROUTE, {}).json() == {"released": 1}
        client.join(60)
        assert client.answer is not None
        if kept:
            assert client.answer.status_code == 200 and client.answer.content == body
        else:
            # Its body went out as it came and is gone: the 502, never a short resend.
            assert client.answer.status_code == 502
            assert client.answer.json()["error"]["type"] == "upstream_unavailable"


@pytest.mark.parametrize("kept", [True, False])
def test_a_client_that_leaves_mid_body_leaves_nothing_behind(door_factory: Any, kept: bool) -> None:
    with upstream() as url:
        door = door_factory(url, "--body-memory-mib", "1" if kept else "0")
        with socket.create_connection(("127.0.0.1", door.port)) as sock:
            sock.sendall(b"POST /body HTTP/1.1\r\nHost: door\r\nContent-Length: 400000\r\n\r\n")
            sock.sendall(b"x" * 100_000)
            assert wait_for(lambda: door.status()["bodies_kept_bytes"] == (400_000 if kept else 0))

        def settled() -> bool:
            status = door.status()
            return (
                status["in_flight"] == 0
                and status["bodies_kept_bytes"] == 0
                and (status["abandoned"] == 1 or status["failed"] == 1)
            )

        assert wait_for(settled)
        assert "Traceback" not in door.text()
        assert http.post(door.url + "/body", content=b"next").content == b"next"
