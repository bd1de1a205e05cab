"""The field report, reproduced: a call at 0.93 collapses decode speed until a restart;
at 0.85 the same call costs a mild dip. Rates are read from /metrics in simulated time."""

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


def kv_usage(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    m = re.search(r"^vllm:kv_cache_usage_perc\{.*\} ([\d.e+-]+)$", text, re.M)
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


def rates_around_a_call(machine: Any, url: str) -> tuple[float, float, float, float]:
    """Decode rate before, during and after a full call under one long request, and the KV
    usage at the height of the call."""
    agent = Agent(url)
    try:
        time.sleep(0.2)
        before = rate(url)
        machine.set_call(True)
        wait_call_level(machine, 1.0)
        time.sleep(0.2)
        during = rate(url)
        usage = kv_usage(url)
        machine.set_call(False)
        wait_call_level(machine, 0.0)
        time.sleep(0.2)
        after = rate(url)
    finally:
        agent.close()
    return before, during, after, usage


def test_call_at_093_collapses_until_restart(machine_factory: Any, server_factory: Any) -> None:
    m = machine_factory(speed=SPEED)
    s = server_factory(m, 0.93)
    assert s.wait_ready()
    before, during, after, usage = rates_around_a_call(m, s.url)
    assert usage < 0.05  # not a full KV cache: low usage throughout
    assert before > 60
    assert during < 12 and after < 12
    assert during / before < 0.2 and after / before < 0.2
    server = m.state()["servers"][0]
    assert server["spilled_bytes"] > 2 * 1024**3
    assert "Error" not in s.text() and "ERROR" not in s.text()  # nothing tells the user
    stats = re.findall(
        r"Engine 000: Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: "
        r"([\d.]+) tokens/s, Running: (\d+) reqs, Waiting: \d+ reqs, GPU KV cache usage: "
        r"([\d.]+)%, Prefix cache hit rate: [\d.]+%",
        s.text(),
    )
    # Low throughout (the report saw 1.7 %): nowhere near KV pressure. The one request grows
    # the longer the call takes to build up, which a loaded machine stretches.
    assert stats and max(float(kv) for _, _, kv in stats) < 10.0

    # Restart only the server: the same load is fast again.
    s.kill_group()
    s2 = server_factory(m, 0.93)
    assert s2.wait_ready()
    agent = Agent(s2.url)
    try:
        time.sleep(0.2)
        restarted = rate(s2.url)
    finally:
        agent.close()
    assert restarted > 60


def test_call_at_085_is_only_a_mild_dip(machine_factory: Any, server_factory: Any) -> None:
    m = machine_factory(speed=SPEED)
    s = server_factory(m, 0.85, max_model_len=163_840)  # the field report's fix: both flags
    assert s.wait_ready()
    before, during, after, _usage = rates_around_a_call(m, s.url)
    assert 0.45 < during / before < 0.85
    # Recovered, not collapsed: the engine's own ±3 % wobble and the timing of two HTTP reads
    # on a busy machine move this ratio by several percent; a collapse puts it under 0.2.
    assert after / before > 0.8
    assert m.state()["servers"][0]["spilled_bytes"] == 0
