"""The fake `VLLM::EngineCore` process: loads "the model" into the simulated GPU and holds it.

Started by the fake API server (same process group). Like the real one it does not exit when
the API server is SIGKILLed: it keeps holding its memory until it gets SIGTERM or SIGINT.
It tells the API server how startup went through a pipe (one JSON line).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from dataclasses import replace
from typing import Literal, TypedDict

from vramtop.core.headroom.startup_checks import (
    NO_CACHE_BLOCKS_MESSAGE,
    free_memory_refusal,
    longest_that_fits,
    pool_refusal,
)
from vramtop.sim import vlog
from vramtop.sim.card import CONTEXT_GIB, GIB, VLLM_VERSION, KvPlan, plan_kv
from vramtop.sim.world_protocol import SOCKET_ENV, WorldClient, WorldRequests, WorldUnreachable

CONFIG_ENV = "VRAMTOP_SIM_ENGINE_CONFIG"
PIPE_ENV = "VRAMTOP_SIM_ENGINE_FD"
PROC = "EngineCore"
NAME = "VLLM::EngineCore"


def _say(message: str) -> None:
    vlog.info(PROC, "gpu_worker.py:276", message)


def print_engine_traceback(exc_name: str, message: str) -> None:
    """The shape vLLM prints when EngineCore fails to start."""
    frames = [
        ("vllm/v1/engine/core.py", 857, "run_engine_core"),
        ("vllm/v1/engine/core.py", 634, "__init__"),
        ("vllm/v1/executor/abstract.py", 101, "_init_executor"),
        ("vllm/v1/worker/gpu_worker.py", 233, "init_device"),
        ("vllm/utils/mem_utils.py", 188, "request_memory"),
    ]
    where = "core.py:866"
    vlog.error(PROC, where, "EngineCore failed to start.")
    vlog.error(PROC, where, "Traceback (most recent call last):")
    for path, lineno, func in frames:
        vlog.error(
            PROC,
            where,
            f'  File "/opt/vllm/lib/python3.12/site-packages/{path}", line {lineno}, in {func}',
        )
    vlog.error(PROC, where, f"{exc_name}: {message}")
    vlog.emit("Process EngineCore:")
    vlog.emit("Traceback (most recent call last):")
    vlog.emit('  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap')
    vlog.emit("    self.run()")
    vlog.emit(f"{exc_name}: {message}")


class EngineConfig(TypedDict):
    """What the API server tells its EngineCore (as JSON, in CONFIG_ENV)."""

    model: str
    served_name: str
    util: float
    total_bytes: int
    kv_cache_dtype: str
    max_model_len: int
    auto_max_model_len: bool
    max_num_batched_tokens: int
    block_size: int
    enforce_eager: bool
    tp: int
    trust_remote_code: bool
    dtype: str
    seed: int | None
    prefix_caching: bool
    startup_s: float


class PlanFields(TypedDict):
    """The KV plan as the engine reports it when ready (`_plan_dict`)."""

    budget: int
    kv_bytes: int
    num_blocks: int
    tokens: int
    block_size: int
    max_concurrency: float
    max_model_len: int
    footprint: int


class EngineReady(TypedDict):
    """The engine's word (one JSON line on its pipe) once its memory is held."""

    event: Literal["ready"]
    pid: int
    plan: PlanFields


class EngineFailed(TypedDict):
    """The engine's word when it could not start."""

    event: Literal["failed"]
    error: str


class Engine:
    def __init__(self, config: EngineConfig, world: WorldRequests, pipe_fd: int | None) -> None:
        self.config = config
        self.world = world
        self.pipe_fd = pipe_fd
        self.stop = threading.Event()
        self.startup_s = float(config.get("startup_s", 3.0))
        self.pid = os.getpid()

    def report(self, event: EngineReady | EngineFailed) -> None:
        if self.pipe_fd is None:
            return
        # If the API server is gone (SIGKILL) we carry on holding memory, like vLLM.
        with contextlib.suppress(OSError):
            os.write(self.pipe_fd, json.dumps(event).encode() + b"\n")

    def pause(self, share: float) -> None:
        self.stop.wait(self.startup_s * share)
        if self.stop.is_set():
            raise SystemExit(0)

    def alloc(self, nbytes: int) -> None:
        answer = self.world.request("alloc", pid=self.pid, name=NAME, bytes=nbytes)
        if not answer.get("ok"):
            raise MemoryError(str(answer.get("error")))

    def plan(self) -> KvPlan:
        c = self.config
        return plan_kv(
            c["util"],
            total=c["total_bytes"],
            kv_cache_dtype=c["kv_cache_dtype"],
            max_model_len=c["max_model_len"],
            max_num_batched_tokens=c["max_num_batched_tokens"],
            block_size=c["block_size"],
            enforce_eager=c["enforce_eager"],
        )

    def start(self) -> int:
        c = self.config
        _say_core(
            f"Initializing a V1 LLM engine (v{VLLM_VERSION}) with config: model='{c['model']}', "
            f"tokenizer='{c['model']}', trust_remote_code={c['trust_remote_code']}, "
            f"dtype={c['dtype']}, max_seq_len={c['max_model_len']}, "
            f"tensor_parallel_size={c['tp']}, enforce_eager={c['enforce_eager']}, "
            f"kv_cache_dtype={c['kv_cache_dtype']}, device_config=cuda, seed={c['seed']}, "
            f"served_model_name={c['served_name']}, "
            f"enable_prefix_caching={c['prefix_caching']}, enable_chunked_prefill=True"
        )
        if c["tp"] > 1:
            msg = (
                f"World size ({c['tp']}) is larger than the number of available GPUs (1) "
                "in this node."
            )
            return self.fail("ValueError", msg)
        self.pause(0.1)
        self.alloc(int(CONTEXT_GIB * GIB))  # the CUDA context, before vLLM's baseline
        state = self.world.request("state")
        total, free = state["device"]["total_bytes"], state["device"]["free_bytes"]
        plan = self.plan()
        refused = free_memory_refusal(free, total, c["util"], plan.budget_bytes)
        if refused is not None:
            return self.fail("ValueError", refused.message)
        vlog.info("Worker", "gpu_model_runner.py:2602", f"Starting to load model {c['model']}...")
        # The durations it prints are the ones it took (vramtop reads them as a step's phases
        # beside its own clock: a nominal 9.8 s of weights in a 4 s start said two things).
        began = time.monotonic()
        self.pause(0.4)
        self.alloc(plan.weights)
        loaded_s = time.monotonic() - began
        vlog.info("Worker", "default_loader.py:267", f"Loading weights took {loaded_s:.2f} seconds")
        vlog.info(
            "Worker",
            "gpu_model_runner.py:2653",
            f"Model loading took {vlog.gib(plan.weights)} GiB memory and {loaded_s:.2f} seconds",
        )
        engine_began = time.monotonic()
        self.pause(0.15)
        self.alloc(plan.non_torch + plan.activation)
        self.summary(plan, free)
        if plan.num_blocks <= 0:
            # vLLM refuses to start when not one KV block fits in the budget.
            return self.fail("ValueError", NO_CACHE_BLOCKS_MESSAGE)
        if c.get("auto_max_model_len"):
            plan = self.auto_fit(plan)
        refused = pool_refusal(
            plan.kv_bytes, plan.num_blocks, plan.max_model_len, plan.request_bytes
        )
        if refused is not None:
            return self.fail("ValueError", refused.message)
        self.alloc(plan.kv_bytes)
        vlog.info(
            PROC,
            "kv_cache_utils.py:1234",
            f"GPU KV cache size: {plan.tokens:,} tokens, Maximum concurrency for "
            f"{plan.max_model_len:,} tokens per request: {plan.max_concurrency:.2f}x",
        )
        if plan.cudagraph:
            graphs_began = time.monotonic()
            self.pause(0.25)
            self.alloc(plan.cudagraph)
            graphs_s = time.monotonic() - graphs_began
            vlog.emit(
                "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| "
                "67/67 [00:03<00:00, 19.85it/s]"
            )
            vlog.info(
                "Worker",
                "gpu_model_runner.py:3480",
                f"Graph capturing finished in {graphs_s:.0f} secs, took "
                f"{vlog.gib(plan.cudagraph)} GiB",
            )
        else:
            self.pause(0.25)
        took = time.monotonic() - engine_began
        _say_core(f"init engine (profile, create kv cache, warmup model) took {took:.2f} seconds")
        self.report({"event": "ready", "pid": self.pid, "plan": _plan_dict(plan)})
        return 0

    def auto_fit(self, plan: KvPlan) -> KvPlan:
        """`--max-model-len auto`: the longest ceiling one request of which fits the pool."""
        longest = longest_that_fits(plan.kv_bytes, plan.max_model_len, plan.request_bytes)
        if longest >= plan.max_model_len or longest < 1:
            return plan
        vlog.info(
            PROC,
            "kv_cache_utils.py:1095",
            f"Auto-fit max_model_len: reduced from {plan.max_model_len} to {longest} to fit "
            f"in available GPU memory ({vlog.gib(plan.kv_bytes)} GiB available for KV cache)",
        )
        return replace(plan, max_model_len=longest)

    def summary(self, plan: KvPlan, free: int) -> None:
        consumed = plan.weights + plan.non_torch
        _say(
            f"Free memory on device ({free / GIB:.2f}/{plan.total / GIB:.2f} GiB) on startup. "
            f"Desired GPU memory utilization is ({plan.budget}, "
            f"{plan.budget_bytes / GIB:.2f} GiB). "
            f"Actual usage is {consumed / GIB:.2f} GiB for consumed memory (weights + non-torch), "
            f"{plan.activation / GIB:.2f} GiB for peak activation, and "
            f"{plan.cudagraph / GIB:.2f} GiB for CUDAGraph memory. Replace "
            f"gpu_memory_utilization config with `--kv-cache-memory={plan.kv_bytes}` to fit into "
            "requested memory, or "
            f"`--kv-cache-memory={plan.kv_bytes + free - plan.budget_bytes}` to "
            f"fully utilize gpu memory. Current kv cache memory in use is {plan.kv_bytes} bytes."
        )
        _say(f"Available KV cache memory: {vlog.gib(plan.kv_bytes)} GiB")
        if plan.cudagraph:
            without = plan.budget - plan.cudagraph / plan.total
            _say(
                "CUDA graph memory profiling is enabled (default since v0.21.0). The current "
                f"--gpu-memory-utilization={plan.budget:.4f} is equivalent to "
                f"--gpu-memory-utilization={without:.4f} without CUDA graph memory profiling. "
                "To maintain the same effective KV cache size as before, increase "
                f"--gpu-memory-utilization to {plan.budget + plan.cudagraph / plan.total:.4f}."
            )

    def fail(self, exc_name: str, message: str) -> int:
        print_engine_traceback(exc_name, message)
        self.report({"event": "failed", "error": f"{exc_name}: {message}"})
        self.release()
        return 1

    def release(self) -> None:
        with contextlib.suppress(WorldUnreachable):  # the world is gone: nothing to free
            self.world.request("free", pid=self.pid)

    def hold(self) -> None:
        """Keep the memory until SIGTERM/SIGINT; the API server's death does not matter."""
        self.stop.wait()


def _say_core(message: str) -> None:
    vlog.info(PROC, "core.py:93", message)


def _plan_dict(plan: KvPlan) -> PlanFields:
    return {
        "budget": plan.budget_bytes,
        "kv_bytes": plan.kv_bytes,
        "num_blocks": plan.num_blocks,
        "tokens": plan.tokens,
        "block_size": plan.block_size,
        "max_concurrency": plan.max_concurrency,
        "max_model_len": plan.max_model_len,
        "footprint": plan.footprint,
    }


def main() -> int:
    try:
        import setproctitle

        setproctitle.setproctitle(NAME)
    except ImportError:
        pass  # the title is cosmetic; process-tree code also matches the command line
    config = json.loads(os.environ[CONFIG_ENV])
    pipe = os.environ.get(PIPE_ENV)
    engine = Engine(config, WorldClient(os.environ[SOCKET_ENV]), int(pipe) if pipe else None)
    signals_seen: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        # Only the first signal touches the Event: a second one (Ctrl-C twice, SIGTERM to the
        # group and to the process) arriving while set() holds its lock must not re-enter it.
        if not signals_seen:
            signals_seen.append(signum)
            engine.stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        code = engine.start()
        if code == 0:
            engine.hold()
    except SystemExit:
        code = 0
    except MemoryError as exc:
        print_engine_traceback("torch.OutOfMemoryError", str(exc))
        engine.report({"event": "failed", "error": str(exc)})
        code = 1
    except WorldUnreachable as exc:
        print_engine_traceback("RuntimeError", f"CUDA error: simulated GPU not reachable: {exc}")
        engine.report({"event": "failed", "error": str(exc)})
        return 1
    engine.release()
    return code


if __name__ == "__main__":
    sys.exit(main())
