"""A hold for a restart does not wait for a generation with no answer begun: it is cancelled
upstream and sent again to the new server once the door is released; an answer begun is let
finish; a request on any other route is waited for as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

import httpx
import pytest

from tests.frontdoor.upstreams import sse_events, upstream_server
from tests.support.waiting import PROCESS_S, stays, wait_until
from vramtop.frontdoor import protocol

pytestmark = pytest.mark.timeout(180)


class Post(threading.Thread):
    """One POST on a thread; keeps its status and the answer's bytes as they arrive."""

    def __init__(self, url: str, body: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.body = body
        self.status: int | None = None
        self.content = b""
        self.error: str | None = None

    def run(self) -> None:
        try:
            with (
                httpx.Client(timeout=150) as client,
                client.stream("POST", self.url, json=self.body) as resp,
            ):
                self.status = resp.status_code
                for chunk in resp.iter_raw():
                    self.content += chunk
        except httpx.HTTPError as exc:
            self.error = repr(exc)


def _url(server: Any) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def _hold(door: Any, drain_s: float) -> dict[str, Any]:
    answer: dict[str, Any] = door.post(
        protocol.HOLD_ROUTE, {"drain_s": drain_s}, timeout=drain_s + 30
    ).json()
    return answer


def _seen(server: Any, path: str) -> bool:
    return ["POST", path] in server.seen


@pytest.mark.parametrize(
    ("slow", "path", "stream"),
    [("answer", "/v1/completions", False), ("headers", "/v1/chat/completions", True)],
)
def test_a_generation_with_no_answer_begun_is_sent_again_to_the_new_server(
    door_factory: Any, slow: str, path: str, stream: bool
) -> None:
    body = {"prompt": "a long answer", "max_tokens": 2000, "stream": stream}
    with upstream_server(slow=slow) as old, upstream_server() as new:
        door = door_factory(_url(old))
        client = Post(door.url + path, body)
        client.start()
        wait_until(lambda: _seen(old, path), deadline_s=PROCESS_S, what="the old server asked")
        # The old server has not answered (it would not until it stops): the hold answers
        # without waiting for it, the request cancelled there and held at the door.
        held = _hold(door, 120)
        assert not old.stopping.is_set() and client.status is None
        assert held["replayed"] == 1 and held["drained"] is True and held["in_flight"] == 0
        wait_until(
            lambda: door.status()["held"] == 1, deadline_s=PROCESS_S, what="the request held"
        )
        old.stopping.set()  # the old server stops
        answer = door.post(protocol.RELEASE_ROUTE, {"upstream": _url(new)}).json()
        assert answer == {"released": 1}
        client.join(60)
        # The new server's answer (it echoes the body), whole, and no error on the way.
        assert (client.status, client.error) == (200, None)
        assert json.loads(client.content) == body
        assert _seen(new, path)
        status = door.status()
        assert (status["served"], status["failed"], status["replayed_total"]) == (1, 0, 1)


def test_every_request_sent_again_gets_its_own_answer(door_factory: Any) -> None:
    with upstream_server(slow="answer") as old, upstream_server() as new:
        door = door_factory(_url(old))
        clients = []
        for n in range(3):
            path = f"/v1/completions?n={n}"
            clients.append(Post(door.url + path, {"n": n}))
            clients[-1].start()
            wait_until(lambda p=path: _seen(old, p), deadline_s=PROCESS_S, what=f"request {n} sent")
        assert _hold(door, 120)["replayed"] == 3
        wait_until(lambda: door.status()["held"] == 3, deadline_s=PROCESS_S, what="3 held")
        old.stopping.set()
        assert door.post(protocol.RELEASE_ROUTE, {"upstream": _url(new)}).json() == {"released": 3}
        for c in clients:
            c.join(60)
        assert [(c.status, json.loads(c.content)) for c in clients] == [
            (200, {"n": n}) for n in range(3)
        ]
        # (Their order out of the queue: test_door_gate's sent-again test; each goes on its
        # own connection, so the order the upstream sees them in is not the door's.)


def test_a_stream_begun_is_let_finish(door_factory: Any) -> None:
    with upstream_server(slow="stream") as old:
        door = door_factory(_url(old))
        client = Post(door.url + "/v1/completions", {"prompt": "x", "stream": True})
        client.start()
        first = sse_events(3)[1]
        wait_until(lambda: client.content == first, deadline_s=PROCESS_S, what="the first event")
        answers: list[dict[str, Any]] = []
        holding = threading.Thread(target=lambda: answers.append(_hold(door, 60)), daemon=True)
        holding.start()
        # Cutting it would be an error the agent sees: the hold waits for its end.
        stays(lambda: not answers, for_s=0.5, what="the hold waiting for the stream begun")
        old.finish_now.set()
        holding.join(60)
        assert answers[0]["drained"] is True and answers[0]["replayed"] == 0
        assert answers[0]["drain_took_s"] > 0
        client.join(30)
        assert client.status == 200 and client.content == b"".join(sse_events(3)[1:])
        assert door.status()["replayed_total"] == 0


@pytest.mark.parametrize(
    "path", ["/tokenize", "/v1/completions/render", "/v1/responses/abc/cancel"]
)
def test_a_request_on_another_route_is_waited_for_as_before(door_factory: Any, path: str) -> None:
    with upstream_server(slow="answer") as old:
        door = door_factory(_url(old))
        client = Post(door.url + path, {"prompt": "x"})
        client.start()
        wait_until(lambda: _seen(old, path), deadline_s=PROCESS_S, what="the request sent")
        held = _hold(door, 0.3)
        assert (held["drained"], held["in_flight"], held["replayed"]) == (False, 1, 0)
        assert door.status()["held"] == 0


@pytest.mark.slow
def test_a_long_answer_in_flight_through_a_restart_gets_the_new_servers_answer(
    machine: Any, server_factory: Any, door_factory: Any
) -> None:
    old = server_factory(machine, 0.93)
    assert old.wait_ready()
    door = door_factory(old.url)
    body = {"prompt": "write at length", "max_tokens": 2000}  # not streamed: ~25 s simulated
    client = Post(door.url + "/v1/completions", body)
    client.start()
    wait_until(lambda: door.status()["in_flight"] == 1, deadline_s=PROCESS_S, what="it forwarded")
    held = _hold(door, 120)
    # The restart begins without waiting for the answer: none has come yet.
    assert client.status is None
    assert (held["replayed"], held["drained"], held["in_flight"]) == (1, True, 0)
    old.kill_group()  # stopped mid-request
    new = server_factory(machine, 0.93)
    assert new.wait_ready()
    assert door.post(protocol.RELEASE_ROUTE, {"upstream": new.url}).json() == {"released": 1}
    client.join(150)
    assert (client.status, client.error) == (200, None)
    answer = json.loads(client.content)
    assert answer["usage"]["completion_tokens"] == 2000
    status = door.status()
    assert (status["served"], status["failed"], status["replayed_total"]) == (1, 0, 1)


def test_a_generation_whose_body_streamed_is_waited_for_as_before(door_factory: Any) -> None:
    # No memory for bodies: the body streams to vLLM as it comes, and once gone it cannot be
    # sent again; cancelled, the request would be lost.
    with upstream_server(slow="answer") as old:
        door = door_factory(_url(old), "--body-memory-mib", "0")
        client = Post(door.url + "/v1/completions", {"prompt": "x" * 1000})
        client.start()
        wait_until(lambda: _seen(old, "/v1/completions"), deadline_s=PROCESS_S, what="it was sent")
        held = _hold(door, 0.3)
        assert (held["drained"], held["in_flight"], held["replayed"]) == (False, 1, 0)


def test_with_replay_off_a_hold_waits_for_every_request_as_before(
    door_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The switch a bench sets to measure today's drain against the replay.
    monkeypatch.setenv("VRAMTOP_DOOR_REPLAY", "0")
    with upstream_server(slow="answer") as old:
        door = door_factory(_url(old))
        client = Post(door.url + "/v1/completions", {"prompt": "x", "max_tokens": 2000})
        client.start()
        wait_until(lambda: _seen(old, "/v1/completions"), deadline_s=PROCESS_S, what="it was sent")
        held = _hold(door, 0.3)
        assert (held["drained"], held["in_flight"], held["replayed"]) == (False, 1, 0)
        assert door.status()["replayed_total"] == 0


def test_a_replay_switch_that_is_neither_0_nor_1_is_refused() -> None:
    env = {**os.environ, "VRAMTOP_DOOR_REPLAY": "off"}
    argv = [sys.executable, "-m", "vramtop.frontdoor", "--listen", "127.0.0.1:1"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "vramtop front door: VRAMTOP_DOOR_REPLAY='off': set it to 1 or 0"
    )
