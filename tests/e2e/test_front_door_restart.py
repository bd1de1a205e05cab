"""A restart and a relaunch of the real vLLM behind vramtop's front door, under three
streaming clients that play an agent (one request after another, no retries): not one
request fails, every request held while no server served is answered, and the longest hold
is printed (`-s` shows it)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field

import httpx
import pytest

from tests.e2e.conftest import SERVED_NAME, Lab, vllm_argv
from tests.support.ports import free_port
from tests.support.waiting import wait_until
from vramtop.config import profile_from_argv
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.supervisor import Supervisor, door, state

pytestmark = pytest.mark.timeout(900)

START_TIMEOUT_S = 420.0


@dataclass
class Agent:
    """One streaming client: a completion after another until stopped, each read to its
    `[DONE]`; a request that errs, or a stream that ends without `[DONE]`, is a failure."""

    url: str
    index: int
    done: int = 0
    failures: list[str] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> Agent:
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"agent-{self.index}")
        self.thread.start()
        return self

    def finish(self, timeout_s: float = 300) -> None:
        self.stopping.set()  # ends after the request under way, never in the middle of one
        assert self.thread is not None
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "a client did not finish"

    def _run(self) -> None:
        body = {
            "model": SERVED_NAME,
            "prompt": f"agent {self.index}: the model server token memory",
            "max_tokens": 24,
            "ignore_eos": True,
            "stream": True,
        }
        # No retry: the agent sees every failure. A long read timeout: a held request waits.
        with httpx.Client(timeout=httpx.Timeout(10.0, read=600.0), trust_env=False) as client:
            while not self.stopping.is_set():
                try:
                    failed = self._one(client, body)
                except (httpx.HTTPError, ValueError) as exc:
                    failed = repr(exc)
                if failed is None:
                    self.done += 1
                else:
                    self.failures.append(failed)
                self.stopping.wait(0.1)  # an agent's pause between two requests

    def _one(self, client: httpx.Client, body: dict[str, object]) -> str | None:
        """One streamed completion; None when it was answered whole, else what went wrong."""
        with client.stream("POST", f"{self.url}/v1/completions", json=body) as resp:
            if resp.status_code != 200:
                resp.read()
                return f"HTTP {resp.status_code}: {resp.text[:200]}"
            ended = False
            for line in resp.iter_lines():
                if line == "data: [DONE]":
                    ended = True
                elif line.startswith("data: "):
                    json.loads(line[6:])
        return None if ended else "the stream ended without [DONE]"


def wait_done(agents: list[Agent], more: int, timeout_s: float = 300) -> None:
    goal = [a.done + more for a in agents]
    wait_until(
        lambda: all(a.done >= g for a, g in zip(agents, goal, strict=True)),
        deadline_s=timeout_s,
        what="the clients served again (they stopped being served)",
    )


def test_restart_and_relaunch_behind_the_door_fail_no_request(lab: Lab) -> None:
    port = free_port()
    profile = profile_from_argv(
        "door-e2e",
        vllm_argv(port),
        env=dict(lab.env),
        stop_timeout_s=20,
        front_door=f"127.0.0.1:{port}",
        drain_s=60,
    )
    sup = Supervisor(profile)
    started = sup.start(timeout_s=START_TIMEOUT_S)
    assert started.ok, started.message
    rec = state.load(profile.name)
    assert rec is not None and rec.internal_port not in (None, port) and door.alive(rec)

    agents = [Agent(sup.agent_url, i).start() for i in range(3)]
    try:
        wait_done(agents, 2)
        restarted = sup.restart(timeout_s=START_TIMEOUT_S)
        assert restarted.ok, restarted.message
        wait_done(agents, 2)
        relaunched = sup.relaunch(RelaunchOrder(FlagChange(0.85), timeout_s=START_TIMEOUT_S))
        assert relaunched.ok, relaunched.message
        wait_done(agents, 2)
    finally:
        for agent in agents:
            agent.finish()
    report = door.info(rec)
    assert report is not None
    print(
        f"\nfront door: {sum(a.done for a in agents)} requests, "
        f"{report['held_total']} held, longest hold {report['longest_hold_s']:.1f} s, "
        f"{report['failed']} failed"
    )
    assert [a.failures for a in agents] == [[], [], []]
    assert report["failed"] == 0 and report["held"] == 0
    assert report["held_total"] >= 1  # requests came while no server served, and were answered
    assert sup.stop().ok
    assert not door.alive(rec)
