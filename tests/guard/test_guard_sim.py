"""The guard on the field report's day. A collapse reaching --on-finding: `vramtop guard
--demo`, real processes (the simulated GPU, its vLLM, the agent and the guard) at
VRAMTOP_SIM_SPEED=4. The whole day's steps down and up: the guard's loop in this process on a
clock it moves. Times are the simulator's own."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.sim_card import CardSupervisor, SimCard
from tests.support.waiting import wait_until
from vramtop.core.news import News
from vramtop.guard.choices import GuardSettings
from vramtop.guard.loop import GuardClock, guard_loop
from vramtop.sim.world_protocol import WorldClient, WorldUnreachable

SPEED = 4.0
# The field report's calls (simulated seconds since the world started).
CALLS = ((60.0, 240.0), (420.0, 600.0))

# Run by the guard for each finding's news: the JSON on stdin, stamped with the simulator's
# time at its arrival.
ON_FINDING = """
import json, sys
from vramtop.sim.world_protocol import WorldClient
finding = json.load(sys.stdin)
t = WorldClient(sys.argv[1]).request("ping")["t"]
with open(sys.argv[2], "a") as out:
    out.write(json.dumps({"t": t, "finding": finding}) + "\\n")
"""


@dataclass
class Guarded:
    home: Path
    env: dict[str, str]
    proc: subprocess.Popen[str]
    world: WorldClient
    delivered: Path
    polls: list[dict[str, Any]] = field(default_factory=list)

    def poll(self) -> dict[str, Any] | None:
        try:
            state = self.world.request("state")
        except WorldUnreachable:
            return None
        state["unix"] = time.time()
        self.polls.append(state)
        return state

    def vramtop(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "vramtop", *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
        )


@pytest.fixture
def guard_on_day(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Guarded]:
    extra: list[str] = getattr(request, "param", [])
    env = {
        **os.environ,
        "VRAMTOP_HOME": str(tmp_path / "home"),
        "VRAMTOP_SIM_SCENARIO": "field_report",
        "VRAMTOP_SIM_SPEED": str(SPEED),
        "VRAMTOP_SIM_STARTUP_S": "0.5",
    }
    script = tmp_path / "on_finding.py"
    script.write_text(ON_FINDING)
    delivered = tmp_path / "delivered.jsonl"
    sock = tmp_path / "home" / "state" / "demo" / "gpu.sock"
    command = f"{sys.executable} {script} {sock} {delivered}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "vramtop", "guard", "--demo", "--on-finding", command, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    guarded = Guarded(tmp_path / "home", env, proc, WorldClient(sock), delivered)
    try:
        yield guarded
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        guarded.vramtop("stop", "--demo")
        with contextlib.suppress(WorldUnreachable):
            guarded.world.request("shutdown")


def deliveries(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_a_collapse_reaches_on_finding_within_15_simulated_seconds_of_its_onset(
    guard_on_day: Guarded,
) -> None:
    g = guard_on_day
    onsets: list[float] = []

    def delivered() -> dict[str, Any] | None:
        """Each look: the simulator's onset of a slowdown, and the collapse's delivery."""
        assert g.proc.poll() is None, g.proc.communicate()[1]
        state = g.poll()
        if state is not None and not onsets:
            slowed = [s["slowed_at"] for s in state["servers"] if s.get("slowed_at") is not None]
            if slowed:
                onsets.append(min(slowed))
        kinds = (d for d in deliveries(g.delivered) if d["finding"]["kind"] == "vram_contention")
        return next(kinds, None)

    found = wait_until(
        delivered, deadline_s=150, what="vram_contention to reach --on-finding", poll_s=0.2
    )
    assert onsets, "the simulator never said when the slowdown began"
    onset = onsets[0]
    first_call = CALLS[0][0]
    # (counted from the simulator's previous clock step: the earliest it can have been)
    assert first_call - 1 <= onset < first_call + 10  # the first call's onset
    assert found["t"] - onset <= 15.0, (found["t"], onset)
    assert found["finding"]["severity"] == "critical" and found["finding"]["remedy"]
    # SIGTERM ends the guard cleanly; the server keeps serving.
    g.proc.send_signal(signal.SIGTERM)
    _, err = g.proc.communicate(timeout=180)  # a generous deadline: a busy machine
    assert g.proc.returncode == 0, err
    assert "vLLM keeps running" in err
    status = json.loads(g.vramtop("status", "--demo", "--json").stdout)
    assert status["state"] == "running"


class Notifier:
    """Where the guard's news goes (kept, for a look)."""

    names = ("test",)
    reach = "test"

    def __init__(self) -> None:
        self.sent: list[News] = []

    def send(self, news: News) -> None:
        self.sent.append(news)

    def close(self) -> None:
        pass


def test_each_call_steps_down_and_back_up_and_the_agent_stays_fast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard's own loop (`guard_loop`: its watch, policies and relaunches, as `vramtop
    guard --auto-remedy between-turns --adaptive --settle 60` runs them) over the field
    report's day on the simulated card, all in this process on a clock the loop's waits move
    (tests/support/sim_card.py): the day's 790 simulated seconds take a few real ones. The
    agent's one long request runs throughout; the profile's front door holds it across each
    relaunch."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("VRAMTOP_HOME", str(home))
    card = SimCard("field_report", speed=SPEED)
    supervisor = CardSupervisor(card, "day", 0.93)
    settle = 60.0
    end_t = CALLS[-1][1] + settle + 130  # the second step up, with a turn's wait
    polls: list[dict[str, Any]] = []
    stop = threading.Event()

    def sleep(seconds: float) -> None:
        """The guard's wait between samples: the card runs `seconds` of simulated time, once
        a relaunch the guard began has answered (at once here: no process starts)."""
        for thread in threading.enumerate():
            if thread.name == "guard-relaunch":
                thread.join(60)
        end = card.clock.now() + seconds
        while card.clock.now() < end:
            supervisor.server.advance()
        polls.append(card.state())
        if card.clock.now() >= end_t:
            stop.set()

    settings = GuardSettings(
        notify=(), on_finding=None, auto_remedy=True, adaptive=True, settle_s=settle
    )
    with supervisor.backend() as backend:
        code = guard_loop(
            backend, Notifier(), settings, 1.0, stop, GuardClock(card.clock.now, sleep)
        )
        events = backend.session.events()
    assert code == 0
    steps = [
        (e.detail["step"], e.detail["gpu_memory_utilization"], e.t)
        for e in events
        if e.name == "guard"
        and e.detail.get("decision") == "done"
        and e.detail.get("result") == "ok"
    ]
    assert [s for s, _, _ in steps] == ["down", "up", "down", "up"], steps
    relaunches = supervisor.relaunches
    assert relaunches and all(r["result"] == "ok" and r["asked_by"] == "guard" for r in relaunches)
    for n, (start, end) in enumerate(CALLS):
        (_, down_util, down_t), (_, up_util, up_t) = steps[2 * n], steps[2 * n + 1]
        assert isinstance(down_util, float) and down_util < 0.93 and up_util == 0.93
        assert start <= down_t < end, (start, down_t)  # down during the call
        assert up_t >= end + settle, (end, up_t)  # up once it settled after it
        # After the step down, to the call's end: the server decodes at ≥ 80 % of its speed.
        during = [
            min(s["rate_factor"] for s in p["servers"])
            for p in polls
            if down_t + 2 <= p["t"] <= end and p["servers"]
        ]
        assert during and min(during) >= 0.8, (n, min(during))
