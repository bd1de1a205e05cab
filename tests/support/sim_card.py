"""The simulated card in the test's own process, on a clock the test moves: the world's
ledger, a server's engine (its memory) and scheduler (its tokens and the stats line), the
same code the simulator's processes run. Simulated minutes take as long as the arithmetic,
and a busy machine cannot change a rate: rates are tokens over simulated seconds."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vramtop.sim import args as vargs
from vramtop.sim import scenario as scenarios
from vramtop.sim.card import MIB
from vramtop.sim.engine import Engine
from vramtop.sim.ledger import Ledger
from vramtop.sim.machine import SimMachine
from vramtop.sim.server import STATS_INTERVAL_S, ApiServer, StatsLine
from vramtop.sim.serving import Scheduler, count_tokens
from vramtop.sim.world import World

ASK_EVERY_S = 1.0  # as the server's own thread: the engine's condition once a simulated second


class SteppedClock:
    """Simulated time that moves only when waited on: a wait of `s` seconds is `s` seconds."""

    def __init__(self, speed: float = 1.0) -> None:
        self.speed = speed  # paces the scheduler's steps as the real clock at this speed would
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def wait(self, seconds: float) -> bool:
        self.t += max(0.0, seconds)
        return False


class Server:
    """One simulated vLLM on the card: started, serving one long request while `run` moves
    the clock, its condition re-asked and its stats line said as the real one does."""

    def __init__(self, card: SimCard, pid: int, util: float, **flags: Any) -> None:
        self.card = card
        self.pid = pid
        argv = card.machine.server_argv(util, **flags)[3:]  # after `python -m vramtop.sim.server`
        api = ApiServer(vargs.parse(argv), card.world, "")
        api.banner()
        config = {**api.engine_config(), "startup_s": 0.0}
        engine = Engine(config, card.world, None)
        engine.pid = pid
        assert engine.start() == 0
        plan = engine.plan()
        self.sched = Scheduler(
            card.world,
            pid,
            speed=card.clock.speed,
            max_num_seqs=api.a.max_num_seqs or 256,
            num_blocks=plan.num_blocks,
            block_size=plan.block_size,
            clock=card.clock,
        )
        self.stats = StatsLine(self.sched)
        self._next_ask = self._next_stats = card.clock.now()
        self._next_stats += STATS_INTERVAL_S
        self._request: Iterator[str] | None = None

    def start_request(self, prompt: str = "x" * 8000, max_tokens: int = 10**7) -> None:
        """One long streaming request, like an agent's long answer (the scheduler's own)."""
        self._request = self.sched.generate(count_tokens(prompt), max_tokens)

    def stop_request(self) -> None:
        if self._request is not None:
            self._request.close()
            self._request = None

    def step(self) -> None:
        """One step of the server: the world re-asked and the stats line said when due, and
        the request's next tokens (or, idle, one simulated second)."""
        clock = self.card.clock
        if clock.now() >= self._next_ask:
            self.sched.ask_world()
            self._next_ask = clock.now() + ASK_EVERY_S
        if clock.now() >= self._next_stats:
            self.stats.say()
            self._next_stats += STATS_INTERVAL_S
        if self._request is None:
            clock.wait(ASK_EVERY_S)
        else:
            next(self._request)

    def run(self, seconds: float) -> None:
        end = self.card.clock.now() + seconds
        while self.card.clock.now() < end:
            self.step()

    def run_until(self, done: Any, limit_s: float = 600.0) -> None:
        """Step until `done()` holds; fail after `limit_s` simulated seconds."""
        end = self.card.clock.now() + limit_s
        while not done():
            assert self.card.clock.now() < end, f"not within {limit_s} simulated seconds"
            self.step()

    def rate(self, window_s: float = 20.0) -> float:
        """Generation tokens per simulated second over the next `window_s` simulated seconds."""
        t0, g0 = self.card.clock.now(), self.sched.generation_tokens_total
        self.run(window_s)
        t1, g1 = self.card.clock.now(), self.sched.generation_tokens_total
        return (g1 - g0) / (t1 - t0)

    def exit(self) -> None:
        """The server and its engine gone (a restart's first half): its memory is freed."""
        self.stop_request()
        self.sched.stop.set()
        self.card.world.request("free", pid=self.pid)


class SimCard:
    """The simulated machine (scenario, card) in this process, at `speed` (which only sets
    how finely the scheduler steps, as the real one at that speed)."""

    def __init__(self, scenario: str = "manual", speed: float = 1.0, seed: int = 0) -> None:
        self.clock = SteppedClock(speed)
        self.machine = SimMachine(Path(tempfile.gettempdir()) / "vramtop-sim-card-unused")
        card = self.machine.card
        ledger = Ledger(scenarios.load(scenario), card.total_mib * MIB, seed, card=card)
        self.world = World(ledger, clock=self.clock)
        self._pids = iter(range(4_000_000, 4_100_000))

    def server(self, util: float, **flags: Any) -> Server:
        return Server(self, next(self._pids), util, **flags)

    def set_call(self, on: bool) -> None:
        self.world.request("call", on=on)

    def state(self) -> dict[str, Any]:
        return self.world.request("state")
