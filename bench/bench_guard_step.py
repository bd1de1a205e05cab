"""The guard's step, measured: the simulated field-report day (`--day`, two video calls) under
the adaptive guard (`vramtop guard --demo --adaptive --auto-remedy between-turns`), which
steps the budget down for each call and back up after it, with an agent sending through the
front door throughout (`--streams` streaming clients, `--plain` clients whose requests are
not streamed; the guard's demo runs its own coding agent through the door too, two streams
of up to 256 tokens, in both runs). The day's calls come `--lead` simulated seconds later
than the scenario says, so that the guard's first start is done before the first call. Run
twice in one go: with the door's replay (a hold sends the generations with no answer begun
again to the new server) and with today's drain (`VRAMTOP_DOOR_REPLAY=0`: the hold lets
every request in flight finish, up to `drain_s`).

Printed per step (each relaunch the guard wrote to the timeline), side by side: the agent's
longest wait over the requests under way during the step (a stream's send to its first
byte; apart, a request not streamed: its send to its whole answer), the requests replayed,
cut (a stream broken after its first byte) and failed (an error answer, or none), and
vramtop's own share of the step (its total less vLLM's own process start → ready,
`ready_s`); then the medians and the ratios (drain / replay). Figures, not assertions.

    python -m bench.bench_guard_step [--speed 5] [--streams 3] [--plain 2] [--settle 60]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from vramtop.sim.machine import world_socket
from vramtop.sim.scenario import SCENARIO_DIR
from vramtop.sim.world_protocol import WorldClient, WorldUnreachable

MODES = (("replay", "1"), ("drain", "0"))


@dataclass
class Request:
    """One request of the agent, by wall time: sent, its answer's first byte, its end, and
    how it ended (`ok`, `cut`: a stream broken after its first byte, `failed`)."""

    stream: bool
    sent: float
    first: float | None = None
    ended: float | None = None
    outcome: str = "open"
    error: str = ""  # what the agent saw of a request that failed or was cut

    def wait_s(self, now: float) -> float:
        """How long the agent waited for its answer to begin (until `now` if it has not)."""
        return (self.first if self.first is not None else (self.ended or now)) - self.sent

    def under_way(self, start: float, end: float) -> bool:
        """Whether it was under way at some moment of [start, end]."""
        return self.sent <= end and (self.ended is None or self.ended >= start)


@dataclass(frozen=True)
class Step:
    """A relaunch of the guard's, as its timeline event says."""

    began: float  # wall time: the event's time less its total
    ended: float
    budget: float | None
    result: str
    replayed: int
    total_s: float
    own_s: float | None  # total less vLLM's start → ready
    drained_s: float | None


def steps_of(events: list[dict[str, Any]]) -> list[Step]:
    """The relaunch events that carry their phases, as `Step`s."""
    out = []
    for event in events:
        detail = event.get("detail") or {}
        phases = detail.get("phases")
        if event.get("event") != "relaunch" or not isinstance(phases, dict):
            continue
        total = phases.get("total_s")
        if not isinstance(total, int | float):
            continue
        ready = phases.get("ready_s")
        out.append(
            Step(
                began=float(event["t"]) - float(total),
                ended=float(event["t"]),
                budget=detail.get("gpu_memory_utilization"),
                result=str(detail.get("result")),
                replayed=int(detail.get("replayed") or 0),
                total_s=float(total),
                own_s=float(total) - float(ready) if isinstance(ready, int | float) else None,
                drained_s=phases.get("drained_s"),
            )
        )
    return out


@dataclass(frozen=True)
class StepFigures:
    budget: float | None
    result: str
    longest_wait_s: float  # a stream's send to its first byte
    longest_plain_s: float  # a request not streamed: its send to its whole answer
    replayed: int
    cut: int
    failed: int
    own_s: float | None
    total_s: float
    drained_s: float | None


def figures(step: Step, requests: list[Request], slack_s: float = 1.0) -> StepFigures:
    """A step's figures from the agent's requests under way while it ran (`slack_s` after
    its end: a request released at ready)."""
    end = step.ended + slack_s
    seen = [r for r in requests if r.under_way(step.began, end)]
    ended_in = [r for r in seen if r.ended is not None and step.began <= r.ended <= end]
    return StepFigures(
        budget=step.budget,
        result=step.result,
        longest_wait_s=max((r.wait_s(end) for r in seen if r.stream), default=0.0),
        longest_plain_s=max((r.wait_s(end) for r in seen if not r.stream), default=0.0),
        replayed=step.replayed,
        cut=sum(1 for r in ended_in if r.outcome == "cut"),
        failed=sum(1 for r in ended_in if r.outcome == "failed"),
        own_s=step.own_s,
        total_s=step.total_s,
        drained_s=step.drained_s,
    )


class Agent:
    """The agent's clients, each on a thread of its own, sending one request after another
    until stopped; every request kept."""

    def __init__(self, url: str, streams: int, plain: int, stream_tokens: int, tokens: int):
        self.url = url
        self.requests: list[Request] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._loop, args=(True, stream_tokens), daemon=True)
            for _ in range(streams)
        ] + [
            threading.Thread(target=self._loop, args=(False, tokens), daemon=True)
            for _ in range(plain)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def end(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(300)

    def _loop(self, stream: bool, tokens: int) -> None:
        with httpx.Client(timeout=httpx.Timeout(900, connect=10)) as client:
            while not self.stop.is_set():
                req = Request(stream, time.time())
                with self._lock:
                    self.requests.append(req)
                self._send(client, req, tokens)
                if req.outcome == "failed":
                    self.stop.wait(0.5)  # an agent's retry after an error, not a busy loop

    def _send(self, client: httpx.Client, req: Request, tokens: int) -> None:
        body = {"prompt": "write the next function", "max_tokens": tokens, "stream": req.stream}
        try:
            with client.stream("POST", self.url + "/v1/completions", json=body) as answer:
                ok = answer.status_code == 200
                for _ in answer.iter_raw():
                    if req.first is None:
                        req.first = time.time()
                req.outcome = "ok" if ok else "failed"
                if not ok:
                    req.error = f"HTTP {answer.status_code}"
        except httpx.HTTPError as exc:
            req.outcome = "cut" if req.first is not None else "failed"
            req.error = repr(exc)[:120]
        req.ended = time.time()


def vramtop(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vramtop", *args], capture_output=True, text=True, env=env
    )


def door_url(env: dict[str, str], guard: subprocess.Popen[str], timeout_s: float) -> str | None:
    """The front door's URL once the guard's server runs behind it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and guard.poll() is None:
        with contextlib.suppress(ValueError):
            data = json.loads(vramtop(env, "status", "--demo", "--json").stdout)
            if data.get("state") == "running" and data.get("front_door"):
                return f"http://{data['front_door']}"
        time.sleep(0.5)
    return None


def sim_t(world: WorldClient) -> float | None:
    try:
        return float(world.request("ping")["t"])
    except (WorldUnreachable, KeyError, TypeError, ValueError):
        return None


def day_later(day: dict[str, Any], lead_s: float) -> dict[str, Any]:
    """The day with its calls `lead_s` simulated seconds later: the guard's first start done
    before the first call (on a busy machine it takes some real seconds, many simulated)."""
    calls = [{"start": c["start"] + lead_s, "end": c["end"] + lead_s} for c in day["calls"]]
    return {**day, "calls": calls}


def run_day(
    mode: str, replay: str, args: argparse.Namespace, day: dict[str, Any], end_t: float
) -> list[StepFigures]:
    """One simulated day under the guard with the agent's load; its steps' figures."""
    work = Path(tempfile.mkdtemp(prefix=f"vramtop-step-{mode}-"))
    (work / "day.json").write_text(json.dumps(day))
    env = {
        **os.environ,
        "VRAMTOP_HOME": str(work / "home"),
        "VRAMTOP_SIM_SCENARIO": str(work / "day.json"),
        "VRAMTOP_SIM_SPEED": str(args.speed),
        "VRAMTOP_SIM_STARTUP_S": str(args.startup),
        "VRAMTOP_DOOR_REPLAY": replay,
    }
    guard = subprocess.Popen(
        [
            *(sys.executable, "-m", "vramtop", "guard", "--demo", "--adaptive"),
            *("--auto-remedy", "between-turns", "--settle", str(args.settle)),
            *("--interval", str(args.interval), "--notify", "terminal"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    world = WorldClient(world_socket(work / "home" / "state" / "demo"))
    agent: Agent | None = None
    try:
        url = door_url(env, guard, 120)
        if url is None:
            print(f"{mode}: the guard's server did not come up behind its door")
            return []
        agent = Agent(url, args.streams, args.plain, args.stream_tokens, args.tokens)
        agent.start()
        print(f"{mode}: the agent sends from simulated second {sim_t(world)}", flush=True)
        # The day's end in simulated time; a world that stops answering for a minute ends it.
        answered = time.monotonic()
        while guard.poll() is None and time.monotonic() - answered < 60.0:
            now = sim_t(world)
            if now is not None:
                answered = time.monotonic()
                if now >= end_t:
                    break
            time.sleep(1.0)
        agent.end()
        events = json.loads(vramtop(env, "events", "--demo", "--json").stdout)["events"]
        requests = list(agent.requests)
        kinds: dict[str, int] = {}
        for r in requests:
            kinds[r.outcome] = kinds.get(r.outcome, 0) + 1
        print(f"{mode}: {len(requests)} requests {json.dumps(kinds, sort_keys=True)}")
        began = requests[0].sent if requests else 0.0
        for r in requests:
            if r.outcome in ("failed", "cut"):
                kind = "stream" if r.stream else "not streamed"
                print(
                    f"  {r.outcome} ({kind}): sent at {r.sent - began:.1f} s, ended at "
                    f"{(r.ended or 0.0) - began:.1f} s: {r.error}"
                )
        steps = steps_of(events)
        said = ", ".join(f"{st.began - began:.1f}–{st.ended - began:.1f}" for st in steps)
        print(f"  its steps, in s from the agent's first request: {said}")
        return [figures(step, requests) for step in steps]
    finally:
        if agent is not None:
            agent.stop.set()
        if guard.poll() is None:
            guard.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                guard.wait(150)
        vramtop(env, "stop", "--demo")
        with contextlib.suppress(WorldUnreachable):
            world.request("shutdown")
        shutil.rmtree(work, ignore_errors=True)


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "—" if a is None or not b else f"{a / b:.2f}"


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _cells(f: StepFigures | None) -> str:
    if f is None:
        return f"{'(no step)':<62}"
    return (
        f"{f.longest_wait_s:6.2f} {f.longest_plain_s:6.2f}  {f.replayed:4d} {f.cut:3d} "
        f"{f.failed:4d}  {_s(f.own_s):>6} {f.total_s:6.2f} {_s(f.drained_s):>6}  "
        f"{f.result[:11]:<11}"
    )


def report(days: dict[str, list[StepFigures]]) -> None:
    replay, drain = days["replay"], days["drain"]
    head = "wait s  plain s  repl cut fail   own s  total  drain  result     "
    print(f"{'':12}| {'with replay':<63}| {'today’s drain':<63}| drain / replay")
    print(f"step budget | {head}| {head}| wait  plain  own")
    for n in range(max(len(replay), len(drain))):
        a = replay[n] if n < len(replay) else None
        b = drain[n] if n < len(drain) else None
        either = a if a is not None else b
        budget = either.budget if either is not None else None
        ratios = ""
        if a is not None and b is not None:
            ratios = (
                f"{_ratio(b.longest_wait_s, a.longest_wait_s):>5} "
                f"{_ratio(b.longest_plain_s, a.longest_plain_s):>6} {_ratio(b.own_s, a.own_s):>5}"
            )
        print(f"{n + 1:4d} {_s(budget):>6} | {_cells(a)}| {_cells(b)}| {ratios}")
    medians: dict[str, tuple[float | None, float | None, float | None]] = {}
    for name, day in days.items():
        medians[name] = (
            _median([f.longest_wait_s for f in day]),
            _median([f.longest_plain_s for f in day]),
            _median([f.own_s for f in day]),
        )
        wait, plain, own = medians[name]
        print(
            f"{name}: {len(day)} steps; median longest wait {_s(wait)} s (a stream's first "
            f"byte), {_s(plain)} s (an answer not streamed); median own share {_s(own)} s of "
            f"a median step of {_s(_median([f.total_s for f in day]))} s; replayed "
            f"{sum(f.replayed for f in day)}, cut {sum(f.cut for f in day)}, failed "
            f"{sum(f.failed for f in day)}"
        )
    (wa, pa, oa), (wb, pb, ob) = medians["replay"], medians["drain"]
    print(
        f"ratios of the medians (today's drain / replay): longest wait {_ratio(wb, wa)}, "
        f"answer not streamed {_ratio(pb, pa)}, own share {_ratio(ob, oa)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--day", default="field_report", help="the simulated day (scenario)")
    parser.add_argument("--lead", type=float, default=300.0, help="simulated s before the day")
    parser.add_argument("--speed", type=float, default=5.0, help="simulated seconds a second")
    parser.add_argument("--startup", type=float, default=3.0, help="the sim vLLM's start, real s")
    parser.add_argument("--settle", type=float, default=60.0, help="simulated s before step up")
    parser.add_argument("--interval", type=float, default=10.0, help="simulated s per sample")
    parser.add_argument("--streams", type=int, default=3, help="streaming clients")
    parser.add_argument("--plain", type=int, default=2, help="clients not streamed")
    parser.add_argument("--stream-tokens", type=int, default=300, help="tokens a stream asks")
    parser.add_argument("--tokens", type=int, default=2000, help="tokens a plain request asks")
    args = parser.parse_args()
    day = day_later(json.loads((SCENARIO_DIR / f"{args.day}.json").read_text()), args.lead)
    # The day's end: the last call's, then the settle before the step up, and a margin.
    end_t = max(c["end"] for c in day["calls"]) + args.settle + 120.0
    days = {mode: run_day(mode, replay, args, day, end_t) for mode, replay in MODES}
    report(days)
    return 0


if __name__ == "__main__":
    sys.exit(main())
