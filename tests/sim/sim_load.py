"""Load on a simulated server run as a real process: one long streaming request (the agent)
and its decode rate read from /metrics. The rates here are per simulated second from real
time × the speed (a busy machine moves them); tests that compare rates play the call in
their own process instead (tests/support/sim_card.py)."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import httpx

SPEED = 20.0  # simulated time runs 20 times faster (a call ramps up in 0.2 s)


def generated(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    m = re.search(r"^vllm:generation_tokens_total\{.*\} ([\d.e+]+)$", text, re.M)
    assert m
    return float(m.group(1))


def stamped(url: str) -> tuple[float, float]:
    """(when, tokens): the counter, stamped at the middle of the request that read it, so a
    slow answer on a busy machine does not stretch or shrink the measured window."""
    t0 = time.monotonic()
    tokens = generated(url)
    return (t0 + time.monotonic()) / 2, tokens


def rate(url: str, real_s: float = 1.0) -> float:
    """Generation tokens per simulated second over a window of 20 simulated seconds."""
    t0, g0 = stamped(url)
    time.sleep(real_s)
    t1, g1 = stamped(url)
    return (g1 - g0) / ((t1 - t0) * SPEED)


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
            with httpx.stream("POST", self.url + "/v1/completions", json=body, timeout=30) as r:
                for _ in r.iter_lines():
                    if self.stop.is_set():
                        return
        except httpx.HTTPError:
            return

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


def wait_call_level(machine: Any, level: float) -> None:
    deadline = time.monotonic() + 10
    while machine.state()["call_level"] != level and time.monotonic() < deadline:
        time.sleep(0.05)
