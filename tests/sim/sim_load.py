"""Load on a simulated server run as a real process: one long streaming request (the agent),
and a wait for the simulated call's level. No rates here: a rate measured over real time moves
with the machine's load; tests that compare rates play the call in their own process on a
clock they move (tests/support/sim_card.py)."""

from __future__ import annotations

import threading
from typing import Any

import httpx

from tests.support import http
from tests.support.waiting import PROCESS_S, wait_until

SPEED = 20.0  # simulated time runs 20 times faster (a call ramps up in 0.2 s)


class Agent:
    """One long streaming request, like an agent's long answer, until stopped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        body = {"prompt": "x" * 8000, "max_tokens": 10**7, "stream": True}
        try:
            with http.stream("POST", self.url + "/v1/completions", json=body, timeout=30) as r:
                for _ in r.iter_lines():
                    if self.stop.is_set():
                        return
        except httpx.HTTPError:
            return

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


def wait_call_level(machine: Any, level: float) -> None:
    wait_until(
        lambda: machine.state()["call_level"] == level,
        deadline_s=PROCESS_S,
        what=f"the simulated call at level {level}",
    )
