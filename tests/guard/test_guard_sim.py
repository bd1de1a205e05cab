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
def test_a_collapse_reaches_on_finding_critical_with_a_remedy_opened_after_its_onset(
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
    # Opened after the onset, in the samples' clock (the simulator's), and delivered after it
    # opened. How soon it opens is counted on a clock the test moves (the test after this):
    # here the simulator runs in real time, which a busy machine stretches.
    opened = found["finding"]["first_seen_t"]
    assert onset <= opened <= found["t"], (onset, opened, found["t"])
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


@dataclass
class Day:
    """What the guard's own loop did over (part of) the field report's day, run in this
    process on a clock the loop's waits move: the card's state after each wait, the news
    it sent, its session's events, the relaunches it asked for."""

    polls: list[dict[str, Any]]
    sent: list[News]
    events: list[Any]
    relaunches: list[dict[str, Any]]


def guard_the_day(home: Path, settings: GuardSettings, end_t: float) -> Day:
    """The guard's loop (`guard_loop`: its watch, policies and relaunches, as `vramtop guard`
    runs them with `settings`) on the simulated card until `end_t` simulated seconds
    (tests/support/sim_card.py): simulated minutes take a few real seconds. The agent's one
    long request runs throughout."""
    home.mkdir(mode=0o700)
    card = SimCard("field_report", speed=SPEED)
    supervisor = CardSupervisor(card, "day", 0.93)
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

    notifier = Notifier()
    with supervisor.backend() as backend:
        code = guard_loop(backend, notifier, settings, 1.0, stop, GuardClock(card.clock.now, sleep))
        events = backend.session.events()
    assert code == 0
    return Day(polls, notifier.sent, list(events), supervisor.relaunches)


def test_the_first_calls_collapse_is_named_within_15_simulated_seconds_of_its_onset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard watching only (no remedy of its own) names the first call's collapse within
    15 simulated seconds of the simulator's onset, both in the samples' clock."""
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    settings = GuardSettings(
        notify=(), on_finding=None, auto_remedy=False, adaptive=False, settle_s=60.0
    )
    day = guard_the_day(tmp_path / "home", settings, CALLS[0][0] + 40)
    onset = min(
        s["slowed_at"] for p in day.polls for s in p["servers"] if s.get("slowed_at") is not None
    )
    assert CALLS[0][0] - 1 <= onset < CALLS[0][0] + 10, onset
    opened = [n.finding for n in day.sent if n.finding is not None and n.change == "opened"]
    kinds = [f["kind"] for f in opened]
    assert "vram_contention" in kinds, kinds
    found = opened[kinds.index("vram_contention")]
    assert found["severity"] == "critical" and found["remedy"]
    first_seen = found["first_seen_t"]
    assert isinstance(first_seen, float)
    assert onset <= first_seen <= onset + 15.0, (onset, first_seen)


def test_each_call_steps_down_and_back_up_and_the_agent_stays_fast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard's own loop as `vramtop guard --auto-remedy between-turns --adaptive --settle
    60` runs it, over the field report's day (`guard_the_day`); the profile's front door
    holds the agent's request across each relaunch."""
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    settle = 60.0
    end_t = CALLS[-1][1] + settle + 130  # the second step up, with a turn's wait
    settings = GuardSettings(
        notify=(), on_finding=None, auto_remedy=True, adaptive=True, settle_s=settle
    )
    day = guard_the_day(tmp_path / "home", settings, end_t)
    events, polls = day.events, day.polls
    steps = [
        (e.detail["step"], e.detail["gpu_memory_utilization"], e.t)
        for e in events
        if e.name == "guard"
        and e.detail.get("decision") == "done"
        and e.detail.get("result") == "ok"
    ]
    assert [s for s, _, _ in steps] == ["down", "up", "down", "up"], steps
    relaunches = day.relaunches
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
