"""Requests the door does not forward as they came are a 400 in OpenAI's error shape, logged in
one line, never a traceback nor a plain-text answer, and vLLM never sees them."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from tests.frontdoor.upstreams import upstream
from tests.support import http

pytestmark = pytest.mark.timeout(120)

HOST = b"Host: door\r\n"


def exchange(port: int, data: bytes) -> bytes:
    """`data` sent on a connection of its own; everything the door answered until it closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def request(line: bytes, *headers: bytes) -> bytes:
    return line + b"\r\n" + HOST + b"".join(h + b"\r\n" for h in headers) + b"\r\n"


CASES = {
    "absolute-form": request(b"GET http://10.0.0.1/x HTTP/1.1"),
    "absolute-form https": request(b"POST https://10.0.0.1/v1/completions HTTP/1.1"),
    "CONNECT": request(b"CONNECT host:443 HTTP/1.1"),
    "authority-form": request(b"GET host:443 HTTP/1.1"),
    "OPTIONS *": request(b"OPTIONS * HTTP/1.1"),
    "dot segments": request(b"GET /v1/../../etc/passwd HTTP/1.1"),
    "encoded dot segments": request(b"GET /v1/%2E%2e/vramtop/door HTTP/1.1"),
    "a host after //": request(b"GET //evil.example/x HTTP/1.1"),
    "NUL in the target": request(b"GET /x\x00y HTTP/1.1"),
    "CTL in the target": request(b"GET /x\x01y HTTP/1.1"),
    "a header over the limit": request(b"GET /x HTTP/1.1", b"X-Big: " + b"a" * 100_000),
    "too many headers": request(b"GET /x HTTP/1.1", *(b"X-%d: 1" % i for i in range(300))),
    "a bad Content-Length": request(b"POST /x HTTP/1.1", b"Content-Length: abc"),
    "a negative Content-Length": request(b"POST /x HTTP/1.1", b"Content-Length: -1"),
    "two Content-Lengths": request(b"POST /x HTTP/1.1", b"Content-Length: 2", b"Content-Length: 3")
    + b"abc",
    "Transfer-Encoding with Content-Length": request(
        b"POST /x HTTP/1.1", b"Content-Length: 3", b"Transfer-Encoding: chunked"
    )
    + b"0\r\n\r\n",
    "an unknown method": request(b"FOO /x HTTP/1.1"),
    "HTTP/0.9": b"GET /x\r\n\r\n",
    "an unknown version": request(b"GET /x HTTP/9.9"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_request_the_door_does_not_forward_is_a_400_in_openai_shape(
    door_factory: Any, case: str
) -> None:
    with upstream() as url:
        door = door_factory(url)
        answer = exchange(door.port, CASES[case])
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.split(b" ")[1] == b"400", answer[:300]
        assert b"application/json" in head
        error = json.loads(body)["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert (error["type"], error["code"]) == ("bad_request", 400)
        assert error["message"].startswith("vramtop's front door did not forward this request")
        assert http.get(url + "/seen").json() == [["GET", "/seen"]]  # vLLM saw nothing
        # The door goes on serving, and its log has a line, no traceback.
        assert http.get(door.url + "/echo").status_code == 200
        log = door.text()
        assert "Traceback" not in log and "refused" in log
        assert "10.0.0.1" not in log and "passwd" not in log  # the target is not repeated


def test_a_body_promised_with_expect_and_never_sent_forwards_nothing(door_factory: Any) -> None:
    with upstream() as url:
        door = door_factory(url)
        with socket.create_connection(("127.0.0.1", door.port), timeout=30) as sock:
            sock.sendall(
                request(b"POST /body HTTP/1.1", b"Content-Length: 10", b"Expect: 100-continue")
            )
            assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue")
            # Others are served meanwhile; vLLM has not seen the waiting request.
            assert http.get(door.url + "/echo").status_code == 200
            assert ["POST", "/body"] not in http.get(url + "/seen").json()
        assert "Traceback" not in door.text()


def test_clients_that_never_finish_their_headers_hold_nobody_up(door_factory: Any) -> None:
    with upstream() as url:
        door = door_factory(url)
        sockets = [socket.create_connection(("127.0.0.1", door.port)) for _ in range(50)]
        try:
            for sock in sockets:
                sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: door\r\n")
            assert http.get(door.url + "/echo", timeout=30).status_code == 200
        finally:
            for sock in sockets:
                sock.close()
