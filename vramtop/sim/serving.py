"""Token generation at the simulated rate, and the counters /metrics and the stats line show.

Rates are in simulated time: a request decodes at BASE_TPS × the world's rate factor for the
engine's pid (re-asked once per simulated second), slightly less each with two running, and
its prompt is read at PREFILL_TPS × the world's prefill factor (compute-bound: a spill slows
it far less than decoding).
Every wait is counted in simulated seconds on the scheduler's clock (real time × the speed
factor in the server; a clock the test moves in tests).
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from vramtop.sim.clock import ScaledClock, SimClock
from vramtop.sim.world_protocol import WorldRequests, WorldUnreachable

BASE_TPS = 80.0  # one request on an uncontended card (the field report saw 77–83)
BATCH_EFFICIENCY = 0.92  # per-request speed with two running (aggregate ~1.84×)
PREFILL_TPS = 4000.0
PREFIX_HIT_SHARE = 0.6  # an agent resends most of its context: most prompt tokens hit the cache
WORDS = (
    " def",
    " return",
    " self",
    " the",
    " file",
    " test",
    " import",
    " value",
    " =",
    "(",
    ")",
    ":",
    "\n",
    "    ",
    " if",
    " not",
    " None",
    " for",
    " in",
    " path",
    " error",
    " fix",
)
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)


@dataclass
class Histogram:
    buckets: tuple[float, ...] = LATENCY_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS))
    total: float = 0.0
    n: int = 0

    def observe(self, v: float) -> None:
        self.total += v
        self.n += 1
        for i, edge in enumerate(self.buckets):
            if v <= edge:
                self.counts[i] += 1


@dataclass
class Request:
    prompt_tokens: int
    generated: int = 0


class Scheduler:
    """Admits up to `max_num_seqs` requests; the rest wait, as in vLLM."""

    def __init__(
        self,
        world: WorldRequests,
        engine_pid: int,
        *,
        speed: float,
        max_num_seqs: int,
        num_blocks: int,
        block_size: int,
        seed: int = 0,
        clock: SimClock | None = None,
    ) -> None:
        self.world = world
        self.engine_pid = engine_pid
        self.speed = speed
        self.max_num_seqs = max_num_seqs
        self.num_blocks = max(1, num_blocks)
        self.block_size = block_size
        self.rng = random.Random(seed)
        self.lock = threading.Condition()
        self.running: list[Request] = []
        self.waiting = 0
        self.rate_factor = 1.0
        self.prefill_factor = 1.0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.prefix_queries_total = 0
        self.prefix_hits_total = 0
        self.requests_total = 0
        self.ttft = Histogram()
        self.itl = Histogram()
        self.e2e = Histogram()
        self.stop = threading.Event()
        self.clock: SimClock = clock or ScaledClock(speed, self.stop)

    # -- clock --------------------------------------------------------------------------------
    def sim_now(self) -> float:
        return self.clock.now()

    def sleep_sim(self, seconds: float) -> None:
        self.clock.wait(seconds)

    # -- the world ----------------------------------------------------------------------------
    def watch_world(self) -> None:
        """Re-ask the world for this engine's condition once per simulated second (at most
        20 times a real second)."""
        while not self.stop.is_set():
            self.ask_world()
            if self.clock.wait(max(0.05 * self.clock.speed, 1.0)):
                return

    def ask_world(self) -> None:
        """This engine's condition now: how fast it decodes and reads prompts."""
        try:
            # Whether requests run: the card's PCIe traffic and utilisation follow it.
            answer = self.world.request(
                "server_condition", pid=self.engine_pid, decoding=bool(self.running)
            )
            if answer.get("ok"):
                self.rate_factor = float(answer["rate_factor"])
                self.prefill_factor = float(answer.get("prefill_factor", self.rate_factor))
        except (WorldUnreachable, KeyError, ValueError):
            pass  # keep the last factor; the world may be restarting

    def per_request_tps(self) -> float:
        wobble = 1 + 0.03 * math.sin(self.sim_now() / 7.0)
        batch = BATCH_EFFICIENCY if len(self.running) > 1 else 1.0
        return BASE_TPS * wobble * batch * self.rate_factor

    # -- requests -----------------------------------------------------------------------------
    def kv_usage(self) -> float:
        with self.lock:
            blocks = sum(
                math.ceil((r.prompt_tokens + r.generated) / self.block_size) for r in self.running
            )
        return min(1.0, blocks / self.num_blocks)

    def generate(
        self, prompt_tokens: int, max_tokens: int, alive: Callable[[], bool] = lambda: True
    ) -> Iterator[str]:
        """Yield text chunks (one or more tokens each) at the simulated rate."""
        started = self.sim_now()
        req = Request(prompt_tokens)
        with self.lock:
            self.waiting += 1
            while len(self.running) >= self.max_num_seqs and not self.stop.is_set():
                self.lock.wait(0.2)
            self.waiting -= 1
            self.running.append(req)
            self.requests_total += 1
            hits = int(prompt_tokens * PREFIX_HIT_SHARE) if self.requests_total > 1 else 0
            self.prefix_queries_total += prompt_tokens
            self.prefix_hits_total += hits
        try:
            prefill_tps = PREFILL_TPS * max(self.prefill_factor, 0.05)
            self.sleep_sim((prompt_tokens - hits) / prefill_tps)
            with self.lock:
                self.prompt_tokens_total += prompt_tokens
            self.ttft.observe(self.sim_now() - started)
            owed, last = 0.0, self.sim_now()
            while req.generated < max_tokens and not self.stop.is_set() and alive():
                tps = max(self.per_request_tps(), 0.1)
                # A token's time, between 0.02 and 0.25 real seconds.
                speed = self.clock.speed
                self.clock.wait(min(0.25 * speed, max(0.02 * speed, 1.0 / tps)))
                now = self.sim_now()
                owed += (now - last) * tps
                last = now
                n = min(int(owed), max_tokens - req.generated)
                if n <= 0:
                    continue
                owed -= n
                with self.lock:
                    req.generated += n
                    self.generation_tokens_total += n
                for _ in range(n):
                    self.itl.observe(1.0 / tps)
                yield "".join(self.rng.choice(WORDS) for _ in range(n))
        finally:
            with self.lock:
                self.running.remove(req)
                self.lock.notify_all()
            self.e2e.observe(self.sim_now() - started)


def count_tokens(text: str) -> int:
    """About four characters per token, like most BPE vocabularies on English and code."""
    return max(1, len(text) // 4)
