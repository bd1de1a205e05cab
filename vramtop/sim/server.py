"""A fake vLLM server: `python -m vramtop.sim.server [serve] MODEL [vLLM serve flags]`.

Finds the simulated GPU through VRAMTOP_SIM_SOCKET. VRAMTOP_SIM_STARTUP_S (default 3) is the
real time a start takes; VRAMTOP_SIM_SPEED (default 1) runs simulated time faster. It prints
vLLM 0.29's startup lines, starts a `VLLM::EngineCore` child that holds the memory, then serves
vLLM's HTTP routes. SIGTERM/SIGINT stop it (and its engine) within about a second.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

from vramtop.core.json_types import JsonObject
from vramtop.sim import engine as engine_mod
from vramtop.sim import serve_args as vargs
from vramtop.sim import vlog
from vramtop.sim.card import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    NATIVE_MAX_MODEL_LEN,
    VLLM_VERSION,
)
from vramtop.sim.world_protocol import (
    SOCKET_ENV,
    SPEED_ENV,
    STARTUP_ENV,
    WorldClient,
    WorldRequests,
    WorldUnreachable,
)

if TYPE_CHECKING:
    # Loaded while the engine starts (see `start_engine`): the HTTP server's modules are the
    # larger part of this process's start.
    from vramtop.sim.http_api import FakeVllmHttp
    from vramtop.sim.serving import Scheduler

PROC = "APIServer"
STATS_INTERVAL_S = 10.0  # simulated seconds between "Engine 000: …" lines
ROUTES = [
    ("/openapi.json", "GET, HEAD"),
    ("/docs", "GET, HEAD"),
    ("/health", "GET"),
    ("/load", "GET"),
    ("/ping", "GET"),
    ("/version", "GET"),
    ("/metrics", "GET"),
    ("/v1/models", "GET"),
    ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"),
]
LOGO = [
    "",
    "       █     █     █▄   ▄█",
    f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {VLLM_VERSION}",
    "  █▄█▀ █     █     █     █  model   {model}",
    "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀",
    "",
]


def _env_float(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


def _say(where: str, message: str) -> None:
    vlog.info(PROC, where, message)


class ApiServer:
    def __init__(self, a: argparse.Namespace, world: WorldRequests, socket_path: str) -> None:
        self.a = a
        self.world = world
        self.socket_path = socket_path
        self.speed = _env_float(SPEED_ENV, 1.0)
        self.startup_s = _env_float(STARTUP_ENV, 3.0)
        self.stop = threading.Event()
        self.exit_code = 0
        self.engine: subprocess.Popen[bytes] | None = None
        self.served = a.served_model_name or [a.model]
        # `--max-model-len auto`: the engine fits the ceiling to its pool and says so.
        self.auto_max_model_len = a.max_model_len == vargs.AUTO_MAX_MODEL_LEN
        self.max_model_len = (
            NATIVE_MAX_MODEL_LEN
            if self.auto_max_model_len or not a.max_model_len
            else a.max_model_len
        )
        self.block_size = a.block_size or DEFAULT_BLOCK_SIZE

    # -- startup ------------------------------------------------------------------------------
    def banner(self) -> None:
        for text in LOGO:
            _say("api_utils.py:347", text.format(model=self.a.model))
        _say("api_utils.py:286", f"non-default args: {vargs.non_default(self.a)}")
        _say("model.py:733", "Resolved architecture: Qwen3_5ForConditionalGeneration")
        _say("model.py:2152", f"Using max model len {self.max_model_len}")
        if self.a.kv_cache_dtype.startswith("fp8"):
            _say(
                "cache.py:218",
                "Using fp8 data type to store kv cache. It reduces the GPU "
                "memory footprint and boosts the performance. Meanwhile, it may cause accuracy "
                "drop without a proper scaling factor.",
            )
        _say(
            "scheduler.py:226",
            "Chunked prefill is enabled with max_num_batched_tokens="
            f"{self.a.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS}.",
        )

    def engine_config(self) -> engine_mod.EngineConfig:
        a = self.a
        state = self.world.request("state")
        return {
            "model": a.model,
            "served_name": self.served[0],
            "util": a.gpu_memory_utilization,
            "total_bytes": state["device"]["total_bytes"],
            "kv_cache_dtype": a.kv_cache_dtype,
            "max_model_len": self.max_model_len,
            "auto_max_model_len": self.auto_max_model_len,
            "max_num_batched_tokens": a.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS,
            "block_size": self.block_size,
            "enforce_eager": a.enforce_eager,
            "tp": a.tensor_parallel_size,
            "trust_remote_code": a.trust_remote_code,
            "dtype": a.dtype,
            "seed": a.seed,
            "prefix_caching": a.enable_prefix_caching is not False,
            "startup_s": self.startup_s,
        }

    def start_engine(self) -> engine_mod.EngineReady | None:
        """Start EngineCore and wait for its word; None when it failed or we were stopped."""
        read_fd, write_fd = os.pipe()
        env = dict(os.environ)
        env[engine_mod.CONFIG_ENV] = json.dumps(self.engine_config())
        env[engine_mod.PIPE_ENV] = str(write_fd)
        env[SOCKET_ENV] = self.socket_path
        self.engine = subprocess.Popen(
            [sys.executable, "-m", "vramtop.sim.engine"], env=env, pass_fds=(write_fd,)
        )
        os.close(write_fd)
        from vramtop.sim import http_api, serving  # noqa: F401  (loaded while the engine starts)

        buf = b""
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while not self.stop.is_set():
                ready, _, _ = select.select([pipe], [], [], 0.1)
                if not ready:
                    continue
                chunk = pipe.read(65536)
                if not chunk:
                    break  # the engine exited (or closed its end) without a word
                buf += chunk
                if b"\n" in buf:
                    event = json.loads(buf.split(b"\n", 1)[0])
                    return event if event.get("event") == "ready" else None
        return None

    def engine_failed(self) -> None:
        vlog.emit(f"(APIServer pid={os.getpid()}) Traceback (most recent call last):")
        for text in (
            '  File "/opt/vllm/bin/vllm", line 10, in <module>',
            "    sys.exit(main())",
            '  File "/opt/vllm/lib/python3.12/site-packages/vllm/v1/engine/utils.py", '
            "line 933, in wait_for_engine_startup",
            "    raise RuntimeError(",
        ):
            vlog.emit(f"(APIServer pid={os.getpid()}) {text}")
        vlog.emit(
            f"(APIServer pid={os.getpid()}) RuntimeError: Engine core initialization "
            "failed. See root cause above. Failed core proc(s): {}"
        )

    # -- serving ------------------------------------------------------------------------------
    def serve(self, ready: engine_mod.EngineReady) -> int:
        from vramtop.sim.http_api import FakeVllmHttp, Handler
        from vramtop.sim.serving import Scheduler

        a = self.a
        plan = ready["plan"]
        sched = Scheduler(
            self.world,
            int(ready["pid"]),
            speed=self.speed,
            max_num_seqs=a.max_num_seqs or 256,
            num_blocks=plan["num_blocks"],
            block_size=plan["block_size"],
            seed=a.seed,
        )
        host = a.host or "0.0.0.0"
        try:
            http = FakeVllmHttp((a.host or "", a.port), Handler)
        except OSError as exc:
            vlog.error(PROC, "launcher.py:121", f"Failed to bind {host}:{a.port}: {exc}")
            vlog.emit(f"(APIServer pid={os.getpid()}) OSError: [Errno {exc.errno}] {exc.strerror}")
            return 1
        http.sched = sched
        http.model = a.model
        http.served_names = self.served
        self.max_model_len = int(plan.get("max_model_len", self.max_model_len))
        http.max_model_len = self.max_model_len
        http.api_keys = vargs.api_keys(a, dict(os.environ))
        http.access_log = not a.disable_uvicorn_access_log
        http.created = time.time()
        http.cache_info = self.cache_info(plan)
        _say("api_server.py:1839", f"Starting vLLM server on http://{host}:{a.port}")
        _say("launcher.py:29", "Available routes are:")
        for route, methods in ROUTES:
            _say("launcher.py:37", f"Route: {route}, Methods: {methods}")
        threads = [
            threading.Thread(target=http.serve_forever, args=(0.1,), daemon=True),
            threading.Thread(target=sched.watch_world, daemon=True),
            threading.Thread(target=self.watch_engine, args=(http,), daemon=True),
        ]
        if not a.disable_log_stats:
            threads.append(threading.Thread(target=self.log_stats, args=(sched,), daemon=True))
        # As uvicorn: the startup is logged complete before the first request is served (a
        # reader that saw /health answer finds the line in the log).
        vlog.emit(f"INFO:     Started server process [{os.getpid()}]")
        vlog.emit("INFO:     Waiting for application startup.")
        vlog.emit("INFO:     Application startup complete.")
        for t in threads:
            t.start()
        self.stop.wait()
        vlog.emit("INFO:     Shutting down")
        sched.stop.set()
        http.shutdown()
        http.server_close()
        vlog.emit(f"INFO:     Finished server process [{os.getpid()}]")
        return self.exit_code

    def cache_info(self, plan: engine_mod.PlanFields) -> JsonObject:
        return {
            "block_size": plan["block_size"],
            "cache_dtype": self.a.kv_cache_dtype,
            "enable_prefix_caching": self.a.enable_prefix_caching is not False,
            "gpu_memory_utilization": self.a.gpu_memory_utilization,
            "num_cpu_blocks": "None",
            "num_gpu_blocks": plan["num_blocks"],
            "num_gpu_blocks_override": "None",
            "kv_cache_size_tokens": plan["tokens"],
            "kv_cache_memory_bytes": plan["kv_bytes"],
            "kv_cache_max_concurrency": round(plan["max_concurrency"], 4),
            "sliding_window": "None",
        }

    def watch_engine(self, http: FakeVllmHttp) -> None:
        """If EngineCore dies under us, report it and shut down, as vLLM does."""
        while not self.stop.wait(0.2):
            if self.engine is not None and self.engine.poll() is not None:
                http.healthy = False
                vlog.error("AsyncLLM", "async_llm.py:480", "AsyncLLM output_handler failed.")
                vlog.emit(
                    f"(APIServer pid={os.getpid()}) vllm.v1.engine.exceptions."
                    "EngineDeadError: EngineCore encountered an issue. See stack trace "
                    "(above) for the root cause."
                )
                self.exit_code = 1
                self.stop.wait(0.5)
                self.stop.set()

    def log_stats(self, sched: Scheduler) -> None:
        stats = StatsLine(sched)
        while not sched.clock.wait(STATS_INTERVAL_S):
            stats.say()

    def stop_engine(self) -> None:
        """SIGTERM the engine, give it a second, then SIGKILL."""
        if self.engine is None or self.engine.poll() is not None:
            return
        self.engine.terminate()
        try:
            self.engine.wait(1.0)
        except subprocess.TimeoutExpired:
            self.engine.kill()
            self.engine.wait(1.0)

    def run(self) -> int:
        self.banner()
        ready = self.start_engine()
        try:
            if ready is None:
                if self.stop.is_set():
                    return 0
                self.engine_failed()
                return 1
            return self.serve(ready)
        finally:
            self.stop_engine()


class StatsLine:
    """vLLM's "Engine 000: …" line, once per STATS_INTERVAL_S while the engine is busy (and
    once more after), with the throughput since the last one."""

    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched
        self.last_prompt = self.last_gen = self.last_q = self.last_h = 0
        self.was_busy = False

    def say(self) -> None:
        sched = self.sched
        with sched.lock:
            prompt, gen = sched.prompt_tokens_total, sched.generation_tokens_total
            q, h = sched.prefix_queries_total, sched.prefix_hits_total
            running, waiting = len(sched.running), sched.waiting
        busy = running > 0 or waiting > 0 or gen > self.last_gen or prompt > self.last_prompt
        if busy or self.was_busy:
            hit = 100.0 * (h - self.last_h) / (q - self.last_q) if q > self.last_q else 0.0
            _say(
                "loggers.py:123",
                f"Engine 000: Avg prompt throughput: "
                f"{(prompt - self.last_prompt) / STATS_INTERVAL_S:.1f} tokens/s, "
                f"Avg generation throughput: {(gen - self.last_gen) / STATS_INTERVAL_S:.1f} "
                f"tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, "
                f"GPU KV cache usage: {100 * sched.kv_usage():.1f}%, "
                f"Prefix cache hit rate: {hit:.1f}%",
            )
        self.was_busy = busy
        self.last_prompt, self.last_gen, self.last_q, self.last_h = prompt, gen, q, h


def main(argv: list[str] | None = None) -> int:
    a = vargs.parse(sys.argv[1:] if argv is None else argv)
    socket_path = os.environ.get(SOCKET_ENV)
    if not socket_path:
        print(
            f"{vargs.PROG}: error: {SOCKET_ENV} is not set; start the simulated GPU first "
            "(python -m vramtop.sim.world --socket PATH)",
            file=sys.stderr,
        )
        return 2
    world = WorldClient(socket_path)
    try:
        world.request("ping")
    except WorldUnreachable as exc:
        print(f"{vargs.PROG}: error: simulated GPU not reachable: {exc}", file=sys.stderr)
        return 1
    server = ApiServer(a, world, socket_path)
    signals_seen: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        # Only the first signal touches the Event: a second one (Ctrl-C twice, SIGTERM to the
        # group and to the process) arriving while set() holds its lock must not re-enter it.
        if not signals_seen:
            signals_seen.append(signum)
            server.stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        return server.run()
    except WorldUnreachable as exc:
        vlog.error(PROC, "api_server.py:1890", f"simulated GPU not reachable: {exc}")
        server.stop_engine()
        return 1


if __name__ == "__main__":
    sys.exit(main())
