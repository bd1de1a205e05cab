"""The simulated card in the test's own process, on a clock the test moves: the world's
ledger, a server's engine (its memory) and scheduler (its tokens and the stats line), the
same code the simulator's processes run. Simulated minutes take as long as the arithmetic,
and a busy machine cannot change a rate: rates are tokens over simulated seconds."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from vramtop.core.model import DoorReading, ServerInfo, ServerState
from vramtop.core.remedy import RelaunchOrder
from vramtop.machines.machine_backend import MachineBackend
from vramtop.machines.sampler import Sampler
from vramtop.outcomes import ActionResult
from vramtop.sim import scenario as scenarios
from vramtop.sim import serve_args as vargs
from vramtop.sim.card import DEFAULT_CARD, MIB
from vramtop.sim.engine import Engine, _plan_dict
from vramtop.sim.gpu_probe import SimGpuProbe
from vramtop.sim.http_api import FakeVllmHttp, Handler
from vramtop.sim.ledger import Ledger
from vramtop.sim.machine import SimMachine
from vramtop.sim.server import STATS_INTERVAL_S, ApiServer, StatsLine
from vramtop.sim.serving import Scheduler, count_tokens
from vramtop.sim.windows_side import SimWindowsSource
from vramtop.sim.world import World
from vramtop.supervisor.action_events import ActionListener, action_done

ASK_EVERY_S = 1.0  # as the server's own thread: the engine's condition once a simulated second
# A generous deadline for a read of the in-process HTTP API (milliseconds on a quiet machine):
# a busy one never turns into a sample without the server's metrics.
HTTP_TIMEOUT_S = 30.0


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
        self.util = util
        self.argv = card.machine.server_argv(util, **flags)
        api = ApiServer(vargs.parse(self.argv[3:]), card.world, "")  # after `-m …server`
        api.banner()
        config = {**api.engine_config(), "startup_s": 0.0}
        engine = Engine(config, card.world, None)
        engine.pid = pid
        assert engine.start() == 0
        self.api, self.plan = api, engine.plan()
        plan = self.plan
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

    def advance(self) -> None:
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
            self.advance()

    def run_until(self, done: Any, limit_s: float = 600.0) -> None:
        """Advance until `done()` holds; fail after `limit_s` simulated seconds."""
        end = self.card.clock.now() + limit_s
        while not done():
            assert self.card.clock.now() < end, f"not within {limit_s} simulated seconds"
            self.advance()

    def rate(self, window_s: float = 20.0) -> float:
        """Generation tokens per simulated second over the next `window_s` simulated seconds."""
        t0, g0 = self.card.clock.now(), self.sched.generation_tokens_total
        self.run(window_s)
        t1, g1 = self.card.clock.now(), self.sched.generation_tokens_total
        return (g1 - g0) / (t1 - t0)

    def info(self) -> ServerInfo:
        """The server as a supervisor's record says it runs."""
        return ServerInfo(
            state=ServerState.RUNNING,
            pid=self.pid,
            pids=(self.pid,),
            argv=tuple(self.argv),
            budget=self.util,
            max_model_len=self.plan.max_model_len,
        )

    @contextmanager
    def http(self) -> Iterator[tuple[str, FakeVllmHttp]]:
        """The server's HTTP API (vLLM's routes, /metrics) on a free loopback port, served
        in a thread over this scheduler: a read while the test holds the clock reads the
        counters at that simulated moment. Yields its URL and the HTTP server."""
        http = FakeVllmHttp(("127.0.0.1", 0), Handler)
        self.point(http)
        thread = threading.Thread(target=http.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{http.server_address[1]}", http
        finally:
            http.shutdown()
            http.server_close()
            thread.join(10)

    def point(self, http: FakeVllmHttp) -> None:
        """`http` answers for this server from now on (a relaunch's new server, same port)."""
        http.sched = self.sched
        http.model = self.api.a.model
        http.served_names = self.api.served
        http.max_model_len = self.plan.max_model_len
        http.api_keys = frozenset()
        http.access_log = False
        http.created = 0.0
        http.cache_info = self.api.cache_info(_plan_dict(self.plan))

    @contextmanager
    def watched(self) -> Iterator[MachineBackend]:
        """The console's backend watching this server (no supervisor: it only reads), its
        samples stamped on the card's clock: the GPU read from the world in this process,
        /metrics over HTTP from `http`."""
        with self.http() as (url, _http):
            sampler = Sampler(
                probe=SimGpuProbe(Path("in-process"), client=self.card.world),
                url=url,
                info=self.info,
                clock=self.card.clock.now,
                timeout_s=HTTP_TIMEOUT_S,
            )
            yield MachineBackend(sampler=sampler, supervisor=None)

    def exit(self) -> None:
        """The server and its engine gone (a restart's first half): its memory is freed."""
        self.stop_request()
        self.sched.stop.set()
        self.card.world.request("free", pid=self.pid)


class SimCard:
    """The simulated machine (scenario, card) in this process, at `speed` (which only sets
    how finely the scheduler steps, as the real one at that speed)."""

    def __init__(
        self, scenario: str = "manual", speed: float = 1.0, seed: int = 0, card: str = DEFAULT_CARD
    ) -> None:
        self.clock = SteppedClock(speed)
        unused = Path(tempfile.gettempdir()) / "vramtop-sim-card-unused"  # never started
        self.machine = SimMachine(unused, card=card)
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


class CardDoor:
    """A front door before the card's server, as the sampler reads one: it holds the agent's
    next request, and counts those in flight (the server's running requests)."""

    def __init__(self, supervisor: CardSupervisor) -> None:
        self.supervisor = supervisor

    def read(self) -> DoorReading:
        running = len(self.supervisor.server.sched.running)
        return DoorReading(address="127.0.0.1:0", in_flight=running)

    def close(self) -> None:
        pass


@dataclass
class CardProfile:
    name: str
    argv: list[str]
    front_door: str | None = "127.0.0.1:0"


@dataclass
class CardRecord:
    launch_id: str
    state: ServerState


class CardSupervisor:
    """What the console's backend asks of a supervisor, for a profile whose server runs on
    the card: its record, and relaunches (the server exits, its memory is freed, one starts
    with the new flags, the agent's held request goes to it). Every relaunch asked is kept in
    `relaunches` (the flags, who asked, the result)."""

    def __init__(self, card: SimCard, name: str, util: float, **flags: Any) -> None:
        self.card = card
        self.name = name
        self.flags = flags
        self.server = card.server(util, **flags)
        self.server.start_request()
        self.profile = CardProfile(name, list(self.server.argv))
        self.log_path: Path | None = None
        self.relaunches: list[dict[str, Any]] = []
        self._launches = 1
        self._listeners: list[ActionListener] = []
        self._http: FakeVllmHttp | None = None

    # -- the record -----------------------------------------------------------------------
    def status(self) -> ServerInfo:
        return self.server.info()

    def record(self) -> CardRecord:
        return CardRecord(f"launch-{self._launches}", ServerState.RUNNING)

    def housekeeping(self) -> None:
        pass

    def door_restarts_since(self) -> int:
        return 0

    def settling(self) -> None:
        return None

    def tell_actions_to(self, listener: ActionListener) -> None:
        self._listeners.append(listener)

    def stop(self, **_: Any) -> ActionResult:
        return ActionResult(False, "the card's server is not stopped in these tests")

    start = restart = stop

    def relaunch(
        self,
        order: RelaunchOrder,
        asked_by: str | None = None,
        **_: Any,
    ) -> ActionResult:
        change = order.change
        old = self.server
        flags = dict(self.flags)
        util = change.budget
        if change.max_model_len is not None:
            flags["max_model_len"] = change.max_model_len
        before = self.record()
        old.exit()
        self.server = self.card.server(util if util is not None else old.util, **flags)
        self.server.start_request()  # the agent's request, held at the door meanwhile
        if self._http is not None:
            self.server.point(self._http)
        self._launches += 1
        self.relaunches.append(
            {
                "util": self.server.util,
                "asked_by": asked_by,
                "result": "ok",
                "t": self.card.clock.now(),
            }
        )
        # Told as the supervisor tells an action that ended (the console's session hears it).
        done = action_done(
            self.name,
            "relaunch",
            ActionResult(True, f"relaunched at {self.server.util:.2f}"),
            asked_by=asked_by or "command",
            before=(before.launch_id, before.state.value),
            after=(self.record().launch_id, ServerState.RUNNING.value),
            detail={"gpu_memory_utilization": util, "max_model_len": change.max_model_len},
        )
        for listener in self._listeners:
            listener(done)
        return done.result

    def run(self, seconds: float) -> None:
        """`seconds` of simulated time on the card, its server serving."""
        self.server.run(seconds)

    @contextmanager
    def backend(self, wsl: bool = False) -> Iterator[MachineBackend]:
        """The backend a guard or a console builds for this profile, its samples on the card's
        clock, its door this supervisor's; `wsl`: the GPU read the WSL2 way (no per-process
        memory)."""
        world, clock = self.card.world, self.card.clock.now
        # The Windows side's counters, where WSL2 has them (as `--demo --wsl` reads them).
        windows = SimWindowsSource("in-process", clock=clock, client=world) if wsl else None
        with self.server.http() as (url, http):
            self._http = http
            sampler = Sampler(
                probe=SimGpuProbe(Path("in-process"), wsl=wsl, client=world),
                url=url,
                info=self.status,
                clock=clock,
                timeout_s=HTTP_TIMEOUT_S,
                door=cast(Any, CardDoor(self)),
                windows=windows,
            )
            yield MachineBackend(sampler=sampler, supervisor=cast(Any, self), wsl=wsl)
