"""SIGTERM: one deadline (`--stop-grace-s`, the docs' number by default) for every request under
way; past it, one with no answer begun gets the 503, one whose answer began is cut, and the
door exits 0."""

from __future__ import annotations

import re
import signal
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.frontdoor.test_door_holding import wait_for
from tests.frontdoor.upstreams import sse_events, upstream
from vramtop.frontdoor import protocol

pytestmark = pytest.mark.timeout(120)

FRONT_DOOR_PAGE = Path(__file__).resolve().parents[2] / "docs" / "front-door.md"


class Get(threading.Thread):
    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.status: int | None = None
        self.content = b""
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            with httpx.Client(timeout=120) as client, client.stream("GET", self.url) as resp:
                self.status = resp.status_code
                for chunk in resp.iter_raw():
                    self.content += chunk
        except httpx.HTTPError as exc:
            self.error = exc


@pytest.mark.slow
def test_past_the_grace_requests_to_a_hung_vllm_are_answered_or_cut(door_factory: Any) -> None:
    with upstream() as url:
        door = door_factory(url, "--stop-grace-s", "1")
        unanswered, begun = Get(door.url + "/hang"), Get(door.url + "/sse-hang")
        unanswered.start()
        begun.start()
        assert wait_for(lambda: door.status()["in_flight"] == 2)
        assert wait_for(lambda: begun.content == sse_events(1)[1])
        door.proc.send_signal(signal.SIGTERM)
        assert door.proc.wait(60) == 0
        unanswered.join(30)
        begun.join(30)
        assert unanswered.status == 503
        assert b"is stopping and did not forward" in unanswered.content
        # The begun answer ends short of a whole one: an error, never a clean end.
        assert isinstance(begun.error, httpx.RemoteProtocolError)
        assert begun.content == sse_events(1)[1]
        log = door.text()
        assert "2 request(s) still under way after the 1 s grace were cut" in log
        assert "Traceback" not in log


def test_the_default_grace_is_the_one_the_docs_state() -> None:
    said = re.search(
        r"lets those in flight finish for up to (\d+) s",
        " ".join(FRONT_DOOR_PAGE.read_text().split()),
    )
    assert said is not None
    assert float(said.group(1)) == protocol.STOP_GRACE_S


@pytest.mark.parametrize("value", ["-1", "soon", "inf"])
def test_a_bad_grace_is_refused(value: str) -> None:
    from tests.frontdoor.test_door_cli import refused

    done = refused("--listen", "127.0.0.1:1", "--stop-grace-s", value)
    assert done.returncode == 2 and "second" in done.stderr
    assert "Traceback" not in done.stderr
