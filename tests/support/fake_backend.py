"""A deterministic in-process Backend for the console's Pilot tests, snapshots and benches.

It plays the field report's machine (a 32 GB card under WSL2, a 27B model, a 9.26 GiB KV pool
at 0.93) from a seeded random stream and a fixed clock, so two runs render the same frames.
Every call is recorded, so tests can assert what the console asked for.
"""

from __future__ import annotations

import math
import random
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from vramtop.core.adaptive_words import AdaptiveState
from vramtop.core.diagnosis.normal_rate import INTER_TOKEN_LATENCY, NormalRate
from vramtop.core.diagnosis.throughput import ThroughputView, ThroughputWindow
from vramtop.core.findings import Evidence, Finding, Ladder, Remedy, RuledOut
from vramtop.core.headroom.terms import Architecture, HeadroomInputs
from vramtop.core.model import (
    GIB,
    MIB,
    CacheConfig,
    GpuDevice,
    GpuReading,
    ProcessMemory,
    Rates,
    Sample,
    ServerInfo,
    ServerMetrics,
    ServerReading,
    ServerState,
    Split,
    SplitMethod,
    StartupFacts,
)
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.core.server_events import Event
from vramtop.machines.interface import CANNOT_ACT, LOG_TAIL, Frame, ProfileLaunch
from vramtop.outcomes import ActionResult, ProgressCallback

if TYPE_CHECKING:
    from vramtop.session.live import LiveSession

EPOCH = 1_700_000_000.0  # the fixed clock's zero: no wall time reaches a rendered frame
TOTAL_BYTES = 32_607 * MIB
WEIGHTS_GIB = 18.9
FIXED_GIB = 1.45  # activation + non-torch + graphs, what vLLM carves out of the budget
OUTSIDE_BUDGET_BYTES = int(0.45 * GIB)  # CUDA context and friends, outside the budget
BYTES_PER_TOKEN = 32_768  # fp8, 8 full-attention layers of a hybrid model
MAX_MODEL_LEN = 163_840
DESKTOP_QUIET_BYTES = int(1.3 * GIB)
CALL_EXTRA_BYTES = int(3.2 * GIB)


class FakeBackend:
    """Scripted samples: `tick()` advances a fixed clock by one second."""

    recorded = False
    finished = False
    cannot_act = CANNOT_ACT
    autostart = False

    @property
    def session(self) -> LiveSession | None:
        return None  # no live session: the findings and events are scripted

    @property
    def front_door(self) -> str | None:
        return None

    @property
    def launch_budget(self) -> float | None:
        return None

    @property
    def profile_launch(self) -> ProfileLaunch | None:
        return None

    def __init__(
        self,
        *,
        seed: int = 7,
        demo: bool = True,
        wsl: bool = True,
        util: float = 0.93,
        profile_name: str | None = "qwen-27b",
        version: str | None = "0.29.0",
    ) -> None:
        self.demo = demo
        self.wsl = wsl
        self.acts = True  # False: watching only, as a URL or a recording
        self.profile_name = profile_name
        self.version = version
        self.call_on = False
        self._rng = random.Random(seed)
        self._latest: Sample | None = None
        self._throughput = ThroughputWindow()
        self._lock = threading.Lock()
        self.t = 0.0
        self.pid = 4242
        self.state = ServerState.RUNNING
        self.util = util
        self.started_at = EPOCH - 3_725.0
        self.ready_s: float | None = 94.0
        self.phase: str | None = "ready"
        self.last_error: str | None = None
        self.collapse = 0.0  # 0 healthy … 1 fully collapsed
        self.gen_counter = 1_000_000.0
        self.prompt_counter = 4_000_000.0
        self.preemptions = 0
        self.nvml_error: str | None = None
        self.gpu_source = "nvml"  # "sim": the demo's simulated GPU
        self.metrics_error: str | None = None
        self._log: list[str] = list(_STARTUP_LOG)
        self._events: list[Event] = [
            Event(0.0, "start", {"gpu_memory_utilization": util}),
            Event(0.0, "ready", {"ready_s": 94.0}),
        ]
        self._findings: list[Finding] = []
        # Open findings are refreshed at each sample, as a rule that still holds refreshes its
        # own; False: held open with the numbers of when they were set (a squeeze that eased).
        self.refreshed = True
        # What the console asked for, in order: ("restart",), ("relaunch", 0.85), ("close", False)
        self.calls: list[tuple[Any, ...]] = []
        self.changes: list[FlagChange] = []  # each relaunch's flags, as the backend got them
        self.closed_with: bool | None = None

    # -- the clock the console is given ---------------------------------------------------
    def clock(self) -> float:
        return EPOCH + self.t

    @property
    def can_act(self) -> bool:
        return self.acts

    # -- Backend ----------------------------------------------------------------------------
    def tick(self, log_limit: int = LOG_TAIL) -> Frame:
        self._latest = self.next_sample()
        return self.framed(self._latest, log_limit)

    def framed(self, sample: Sample, log_limit: int) -> Frame:
        """`sample` and everything shown beside it, from the scripted parts below (a subclass
        changes one part by overriding it)."""
        return Frame(
            sample=sample,
            findings=tuple(self.findings()),
            events=tuple(self.events()),
            log_lines=tuple(self.log_lines(log_limit)) if log_limit > 0 else (),
            log_notice=self.log_notice(),
            headroom_inputs=self.headroom_inputs(),
            normal=self.normal_rates(),
            normal_rate=self.normal_rate(),
            call_on=self.call_on,
            adaptive=self.adaptive_state(),
            throughput=self.throughput(),
            outside_budget_bytes=self.outside_budget_bytes(),
        )

    def log_notice(self) -> str | None:
        return None

    def adaptive_state(self) -> AdaptiveState | None:
        return None

    def outside_budget_bytes(self) -> int | None:
        return None

    def run_housekeeping(self) -> None:
        return None  # nothing is supervised here

    def normal_rate(self) -> NormalRate:
        # The same 77 tok/s as the normal rate, learned on this run.
        return NormalRate({INTER_TOKEN_LATENCY: {1: 77.0}})

    def next_sample(self) -> Sample:
        """The next scripted sample (a subclass changes it here; `tick` frames it)."""
        with self._lock:
            self.t += 1.0
            return self._sample()

    def throughput(self) -> ThroughputView | None:
        """The latest sample's view, made by the core's own window (no diagnosis here: no
        per-request speed is judged, the total stands beside the scripted normal)."""
        latest = self._latest
        if latest is None:
            return None
        view = self._throughput.view
        if view is not None and view.t == latest.t:
            return view
        normal = self.normal_rates().generation_tps
        return self._throughput.add(latest, None, self.normal_rate(), None, normal)

    def start(self, progress: ProgressCallback | None = None) -> ActionResult:
        with self._lock:
            self.calls.append(("start",))
        return self._launch(progress, "started")

    def stop(self, progress: ProgressCallback | None = None) -> ActionResult:
        with self._lock:
            self.calls.append(("stop",))
            self.state = ServerState.STOPPED
            self.pid = self.pid  # kept for the log; the header shows the state
            self._events.append(Event(self.t, "stop", {"reason": "key s"}))
        _say(progress, "stopping")
        _say(progress, "memory released")
        return ActionResult(ok=True, message="vLLM stopped.")

    def restart(
        self, progress: ProgressCallback | None = None, requests_lost: bool = False
    ) -> ActionResult:
        with self._lock:
            self.calls.append(("restart", "requests lost") if requests_lost else ("restart",))
            self._events.append(Event(self.t, "restart", {"reason": "key r"}))
        return self._launch(progress, "restarted")

    def relaunch(
        self, order: RelaunchOrder, progress: ProgressCallback | None = None
    ) -> ActionResult:
        change = order.change
        with self._lock:
            self.calls.append(("relaunch", change.budget))
            self.changes.append(change)
            self.relaunch_flags = {
                "max_model_len": change.max_model_len,
                "precheck": order.precheck,
            }
            if change.budget is not None:
                self.util = change.budget
            self._events.append(Event(self.t, "relaunch", {"gpu_memory_utilization": self.util}))
        return self._launch(progress, f"relaunched at {self.util:.2f}")

    def log_lines(self, limit: int = 500) -> list[str]:
        with self._lock:
            return self._log[-limit:]

    def toggle_call(self) -> bool:
        with self._lock:
            self.call_on = not self.call_on
            self.calls.append(("toggle_call", self.call_on))
            return self.call_on

    def close(self, stop_server: bool) -> None:
        with self._lock:
            self.calls.append(("close", stop_server))
            self.closed_with = stop_server

    # -- optional console extras ------------------------------------------------------------
    def findings(self) -> list[Finding]:
        with self._lock:
            found = [f for f in self._findings if f.closed_t is None]
            if not self.refreshed:
                return found
            return [replace(f, last_seen_t=max(f.last_seen_t, self.t)) for f in found]

    def events(self) -> list[Event]:
        with self._lock:
            rows: list[Event] = list(self._events)
            for f in self._findings:
                detail: dict[str, Any] = {"kind": f.kind, "summary": f.summary}
                if f.duration_s is not None:
                    detail["duration_s"] = f.duration_s
                rows.append(Event(f.first_seen_t, "finding", detail))
            return sorted(rows, key=lambda r: r.t)

    def headroom_inputs(self) -> HeadroomInputs | None:
        return _headroom_inputs(self.util) if self.state is ServerState.RUNNING else None

    def normal_rates(self) -> Rates:
        return Rates(generation_tps=77.0, prompt_tps=410.0)

    # -- scripted trouble, for tests --------------------------------------------------------
    def crash(self) -> None:
        with self._lock:
            self.state = ServerState.CRASHED
            self.last_error = "EngineCore died unexpectedly (exit code -9)."
            self._log += [
                "ERROR 11-14 10:02:11 [core.py:812] EngineCore encountered a fatal error.",
                "ERROR 11-14 10:02:11 [core.py:812] RuntimeError: CUDA error: an illegal "
                "memory access was encountered",
                "vLLM exited with code -9",
            ]
            self._events.append(Event(self.t, "exit", {"returncode": -9}))
            self._findings.append(
                Finding(
                    kind="server_crashed",
                    severity="critical",
                    summary="vLLM exited without being asked to (code -9).",
                    first_seen_t=self.t,
                    last_seen_t=self.t,
                    closed_t=None,
                    evidence=Evidence({"returncode": -9}),
                    ladder=Ladder(
                        observed=("the server process exited with code -9",),
                        inferred=("the engine died; nothing is serving requests",),
                        hypothesis=("killed for memory, or a CUDA fault (see the log)",),
                    ),
                    remedy=Remedy(action="restart"),
                )
            )

    # -- internals ---------------------------------------------------------------------------
    def _launch(self, progress: ProgressCallback | None, verb: str) -> ActionResult:
        for step in ("stopping", "memory released", "loading", "profiling", "ready"):
            _say(progress, step)
        with self._lock:
            self.pid += 101
            self.state = ServerState.RUNNING
            self.started_at = self.clock()
            self.ready_s = 91.0
            self.collapse = 0.0
            self.last_error = None
            self._findings = [
                replace(f, closed_t=self.t) if f.closed_t is None else f for f in self._findings
            ]
            self._events.append(Event(self.t, "ready", {"ready_s": 91.0}))
            self._log.append(f"INFO vramtop: server {verb}, pid {self.pid}")
        return ActionResult(ok=True, message=f"vLLM {verb} (pid {self.pid}).")

    def _budget_bytes(self) -> int:
        return math.ceil(TOTAL_BYTES * self.util)

    def _kv_bytes(self) -> int:
        return max(0, self._budget_bytes() - int((WEIGHTS_GIB + FIXED_GIB) * GIB))

    def _sample(self) -> Sample:
        rng = self._rng
        budget = self._budget_bytes()
        server_bytes = budget + OUTSIDE_BUDGET_BYTES if self.state is ServerState.RUNNING else 0
        headroom = TOTAL_BYTES - budget - OUTSIDE_BUDGET_BYTES
        desktop = DESKTOP_QUIET_BYTES + (CALL_EXTRA_BYTES if self.call_on else 0)
        desktop += int(rng.uniform(0, 0.05) * GIB)
        if self.call_on and desktop > headroom and self.state is ServerState.RUNNING:
            self.collapse = min(1.0, self.collapse + 0.34)
            if self.collapse >= 1.0 and not self.findings_open("vram_contention"):
                self._open_contention()
        used = min(TOTAL_BYTES, server_bytes + desktop)
        running = self.state is ServerState.RUNNING
        gen_tps = (77.0 - 67.0 * self.collapse + rng.uniform(-3, 3)) if running else 0.0
        prompt_tps = (410.0 + rng.uniform(-40, 40)) if running else 0.0
        self.gen_counter += gen_tps
        self.prompt_counter += prompt_tps
        kv_bytes = self._kv_bytes()
        kv_tokens = kv_bytes // BYTES_PER_TOKEN
        gpu = self._gpu(used)
        server = self._server(running, kv_bytes, kv_tokens, rng)
        info = ServerInfo(
            state=self.state,
            pid=self.pid if self.state is not ServerState.STOPPED else None,
            port=8000,
            started_at=self.started_at,
            ready_s=self.ready_s,
            phase=self.phase,
            profile=self.profile_name,
            budget=self.util,
            max_model_len=MAX_MODEL_LEN,
            kv_cache_dtype="fp8",
            returncode=-9 if self.state is ServerState.CRASHED else None,
            last_error=self.last_error,
        )
        startup = StartupFacts(
            version=self.version,
            weights_gib=WEIGHTS_GIB,
            available_kv_gib=round(kv_bytes / GIB, 2),
            kv_cache_tokens=kv_tokens,
            max_concurrency=round(kv_tokens / MAX_MODEL_LEN, 2),
            max_concurrency_len=MAX_MODEL_LEN,
            requested_budget=self.util,
        )
        split = self._split(server_bytes, used, budget, headroom, desktop)
        return Sample(
            t=self.t,
            gpu=gpu,
            server=server,
            info=info,
            startup=startup,
            split=split,
            rates=Rates(generation_tps=gen_tps if running else None, prompt_tps=prompt_tps),
        )

    def findings_open(self, kind: str) -> bool:
        return any(f.kind == kind and f.closed_t is None for f in self._findings)

    def _open_contention(self) -> None:
        self._findings.append(
            Finding(
                kind="vram_contention",
                severity="critical",
                summary="Tokens/s collapsed (77 → 10) while the desktop took the card's "
                "headroom: the desktop is squeezing vLLM.",
                first_seen_t=self.t,
                last_seen_t=self.t,
                closed_t=None,
                evidence=Evidence(
                    {"generation_tps": 10.0, "baseline_tps": 77.0, "kv_usage": 0.017}
                ),
                ruled_out={
                    "kv_pressure": RuledOut("KV usage 1.7 %"),
                    "gpu_throttling": RuledOut("no throttle"),
                },
                ladder=Ladder(
                    observed=(
                        "card full (31.9 of 31.8 GiB), desktop share +3.2 GiB, "
                        "tokens/s 77 → 10, KV usage 1.7 %, no throttling",
                    ),
                    inferred=("contention for physical VRAM with the desktop",),
                    hypothesis=("serving memory lost residency and is read over PCIe",),
                ),
                remedy=Remedy(action="relaunch", budget=0.85),
            )
        )
        self._events.append(Event(self.t, "log", {"line": "collapse onset"}))

    def _gpu(self, used: int) -> GpuReading:
        if self.nvml_error:
            return GpuReading(devices=(), error=self.nvml_error, source=self.gpu_source)
        processes = None
        if not self.wsl:
            processes = (
                ProcessMemory(self.pid, "VLLM::EngineCore", used - DESKTOP_QUIET_BYTES),
                ProcessMemory(1201, "Xorg", int(0.8 * GIB)),
                ProcessMemory(2210, "firefox", int(0.5 * GIB)),
            )
        return GpuReading(
            devices=(
                GpuDevice(
                    index=0,
                    name="NVIDIA GeForce RTX 5090",
                    total_bytes=TOTAL_BYTES,
                    used_bytes=used,
                    free_bytes=TOTAL_BYTES - used,
                    temperature_c=61,
                    sm_clock_mhz=2_610,
                    processes=processes,
                ),
            ),
            source="sim",
        )

    def _server(
        self, running: bool, kv_bytes: int, kv_tokens: int, rng: random.Random
    ) -> ServerReading:
        url = "http://127.0.0.1:8000"
        if not running:
            return ServerReading(url=url, reachable=False, error="connection refused")
        metrics = ServerMetrics(
            generation_tokens_total=self.gen_counter,
            prompt_tokens_total=self.prompt_counter,
            requests_running=1.0,
            requests_waiting=0.0,
            preemptions_total=float(self.preemptions),
            kv_cache_usage=0.017 + rng.uniform(0, 0.004),
            model_name="qwen3.8-27b",
            cache=CacheConfig(
                block_size=16,
                cache_dtype="fp8",
                gpu_memory_utilization=self.util,
                num_gpu_blocks=kv_tokens // 16,
                kv_cache_size_tokens=kv_tokens,
                kv_cache_memory_bytes=kv_bytes,
                kv_cache_max_concurrency=round(kv_tokens / MAX_MODEL_LEN, 2),
            ),
        )
        return ServerReading(
            url=url,
            reachable=self.metrics_error is None,
            healthy=self.metrics_error is None,
            metrics=metrics,
            version=self.version,
            max_model_len=MAX_MODEL_LEN,
            served_model="qwen3.8-27b",
            stale=self.metrics_error is not None,
            error=self.metrics_error,
        )

    def _split(
        self, server_bytes: int, used: int, budget: int, headroom: int, desktop: int
    ) -> Split:
        method = SplitMethod.DERIVED if self.wsl else SplitMethod.PER_PROCESS
        detail = (
            "WSL2 gives no per-process numbers: vLLM's share is its budget plus its CUDA "
            "context; the desktop share is the rest of what the card reports used."
            if self.wsl
            else "Per-process numbers from the driver, summed over vLLM's process tree."
        )
        return Split(
            total_bytes=TOTAL_BYTES,
            server_bytes=server_bytes,
            desktop_bytes=max(0, used - server_bytes),
            free_bytes=TOTAL_BYTES - used,
            method=method,
            detail=detail,
            budget_bytes=budget,
            headroom_bytes=headroom,
        )


def _say(progress: ProgressCallback | None, step: str) -> None:
    if progress is not None:
        progress(step)


_STARTUP_LOG = [
    "INFO 11-14 09:00:01 [api_server.py:1351] vLLM API server version 0.29.0",
    "INFO 11-14 09:00:44 [gpu_model_runner.py:2602] Model loading took 18.90 GiB and 41.2 seconds",
    "INFO 11-14 09:01:20 [gpu_worker.py:298] Available KV cache memory: 9.26 GiB",
    "INFO 11-14 09:01:20 [kv_cache_utils.py:1087] GPU KV cache size: 303,430 tokens",
    "INFO 11-14 09:01:20 [kv_cache_utils.py:1091] Maximum concurrency for 163,840 tokens "
    "per request: 1.85x",
    "INFO 11-14 09:01:35 [api_server.py:1990] Starting vLLM API server 0 on http://127.0.0.1:8000",
    "INFO 11-14 09:02:10 [loggers.py:123] Engine 000: Avg prompt throughput: 412.0 tokens/s, "
    "Avg generation throughput: 77.1 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
    "GPU KV cache usage: 1.7%, Prefix cache hit rate: 63.2%",
]


def _headroom_inputs(util: float) -> HeadroomInputs:
    """The fake card's terms, calibrated like a live server's (same sums as `_kv_bytes`)."""
    arch = Architecture(full_attention_layers=8, kv_heads=8, head_dim=256, dtype="bfloat16")
    return HeadroomInputs(
        total_bytes=TOTAL_BYTES,
        architecture=arch,
        weights_bytes=int(WEIGHTS_GIB * GIB),
        non_torch_bytes=int(0.25 * GIB),
        activation_bytes=int((FIXED_GIB - 0.25) * GIB),
        cudagraph_bytes=0,
        outside_budget_bytes=OUTSIDE_BUDGET_BYTES,
        kv_cache_dtype="fp8",
        max_model_len=MAX_MODEL_LEN,
        vllm_version="0.29.0",
        calibrated_budget=util,
    )
