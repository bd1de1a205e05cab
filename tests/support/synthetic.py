"""Synthetic sessions: sample sequences built from a plain description of each second.

For tests and benches of the diagnosis: a `Tick` says what the machine did during one second
(requests running, tokens/s, KV usage, the desktop's demand, clocks); `build` turns ticks into
`Sample`s with cumulative counters and a split computed the way the real sources do (WSL2:
derived from the budget; Linux: per-process). Defaults are the field report's card.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from vramtop.core.model import (
    GIB,
    MIB,
    CacheConfig,
    GpuDevice,
    GpuReading,
    ProcessMemory,
    Sample,
    ServerInfo,
    ServerMetrics,
    ServerReading,
    ServerState,
    Split,
    SplitMethod,
)

FIELD_TOTAL_BYTES = 32_607 * MIB  # RTX 5090 as the driver reports it
FIELD_UTIL = 0.93
FIELD_KV_POOL_BYTES = int(9.26 * GIB)
FIELD_KV_TOKENS = 120_832
OUTSIDE_BUDGET_BYTES = GIB // 2  # CUDA context, as the derived split estimates it
SERVER_PID = 4242
DESKTOP_PID = 900


@dataclass(frozen=True)
class Tick:
    """What one second looked like."""

    t: float
    running: int = 0
    waiting: int = 0
    generation_tps: float = 0.0
    prompt_tps: float = 0.0
    kv_cache_usage: float = 0.0
    preemptions: int = 0  # preemptions during this second
    desktop_bytes: int = int(1.35 * GIB)  # what the desktop *asks* for
    temperature_c: int = 61
    throttle: tuple[str, ...] = ()
    state: ServerState = ServerState.RUNNING
    healthy: bool | None = True
    # Per-request decode speed as vLLM's per-token latency histogram shows it; None: the
    # server exposes no such histogram (an older vLLM), as before it was read.
    decode_tps: float | None = None


@dataclass
class Card:
    """The machine the ticks run on."""

    total_bytes: int = FIELD_TOTAL_BYTES
    util: float = FIELD_UTIL
    wsl: bool = True
    kv_pool_bytes: int = FIELD_KV_POOL_BYTES
    kv_tokens: int = FIELD_KV_TOKENS
    argv: tuple[str, ...] = (
        "vllm",
        "serve",
        "qwen3.8-27b",
        "--gpu-memory-utilization",
        "0.93",
        "--max-model-len",
        "163840",
        "--max-num-seqs",
        "2",
    )
    max_model_len: int = 163_840
    _counters: dict[str, float] = field(default_factory=dict)

    def reset_counters(self) -> None:
        """A server start: vLLM's counters begin again at zero."""
        self._counters.clear()

    def sample(self, tick: Tick) -> Sample:
        c = self._counters
        running_server = tick.state is ServerState.RUNNING
        if running_server:
            c["gen"] = c.get("gen", 0.0) + tick.generation_tps
            c["prompt"] = c.get("prompt", 0.0) + tick.prompt_tps
            c["pre"] = c.get("pre", 0.0) + tick.preemptions
            if tick.decode_tps is not None and tick.decode_tps > 0:
                c["itl_count"] = c.get("itl_count", 0.0) + tick.generation_tps
                c["itl_sum"] = c.get("itl_sum", 0.0) + tick.generation_tps / tick.decode_tps
        budget = math.ceil(self.total_bytes * self.util)
        server_full = budget + OUTSIDE_BUDGET_BYTES if running_server else 0
        if self.wsl:
            # The desktop only gets what is left; the server's share is derived from its budget.
            used = min(self.total_bytes - 200 * MIB, server_full + tick.desktop_bytes)
            server = min(used, server_full)
            desktop = used - server
            processes = None
            method = SplitMethod.DERIVED
        else:
            # Native: the desktop's allocations succeed and push the server's memory out.
            desktop = tick.desktop_bytes
            server = max(0, min(server_full, self.total_bytes - 200 * MIB - desktop))
            used = server + desktop
            procs = [ProcessMemory(DESKTOP_PID, "Xorg", desktop)]
            if running_server:
                procs.append(ProcessMemory(SERVER_PID, "python3", server))
            processes = tuple(procs)
            method = SplitMethod.PER_PROCESS
        device = GpuDevice(
            index=0,
            name="NVIDIA GeForce RTX 5090",
            total_bytes=self.total_bytes,
            used_bytes=used,
            free_bytes=self.total_bytes - used,
            temperature_c=tick.temperature_c,
            sm_clock_mhz=2610 if not tick.throttle else 1800,
            throttle=tick.throttle,
            processes=processes,
        )
        metrics = None
        if running_server:
            metrics = ServerMetrics(
                generation_tokens_total=c["gen"],
                prompt_tokens_total=c["prompt"],
                requests_running=float(tick.running),
                requests_waiting=float(tick.waiting),
                preemptions_total=c["pre"],
                kv_cache_usage=tick.kv_cache_usage,
                inter_token_latency_sum_s=c.get("itl_sum"),
                inter_token_latency_count=c.get("itl_count"),
                cache=CacheConfig(
                    gpu_memory_utilization=self.util,
                    kv_cache_size_tokens=self.kv_tokens,
                    kv_cache_memory_bytes=self.kv_pool_bytes,
                ),
            )
        server_reading = ServerReading(
            url="http://127.0.0.1:8000",
            reachable=running_server,
            healthy=tick.healthy if running_server else None,
            metrics=metrics,
        )
        info = ServerInfo(
            state=tick.state,
            pid=SERVER_PID,
            argv=self.argv,
            budget=self.util,
            max_model_len=self.max_model_len,
        )
        split = Split(
            total_bytes=self.total_bytes,
            server_bytes=server,
            desktop_bytes=desktop,
            free_bytes=self.total_bytes - used,
            method=method,
            detail="synthetic",
            budget_bytes=budget,
            headroom_bytes=self.total_bytes - budget - OUTSIDE_BUDGET_BYTES,
        )
        return Sample(
            t=tick.t,
            gpu=GpuReading(devices=(device,), source="sim"),
            server=server_reading,
            info=info,
            split=split,
        )


# A record of a synthetic session: a Sample, or an event as (t, name, detail).
Event = tuple[float, str, dict[str, Any]]


def build(card: Card, items: Iterable[Tick | Event]) -> Iterator[Sample | Event]:
    """Turn ticks into samples (events pass through; a start resets the counters)."""
    for item in items:
        if isinstance(item, Tick):
            yield card.sample(item)
        else:
            if item[1] in ("start", "restart", "relaunch"):
                card.reset_counters()
            yield item


def busy(t: float, tps: float = 77.0, running: int = 1, **kw: Any) -> Tick:
    """A second of healthy decoding: short prompts, low KV usage."""
    kw.setdefault("prompt_tps", 12.0)
    kw.setdefault("kv_cache_usage", 0.017)
    return Tick(t=t, running=running, generation_tps=tps, **kw)


def idle(t: float, **kw: Any) -> Tick:
    return Tick(t=t, **kw)


def field_report(call_at: float = 120.0, restart_at: float = 400.0) -> list[Tick | Event]:
    """The field report: healthy 77 tok/s, a call squeezes the card, tokens/s collapse to
    ~7 with KV at 1.7 %; the call ends (still slow); a restart alone restores ~83 tok/s."""
    items: list[Tick | Event] = [(0.0, "start", {}), (1.0, "ready", {})]
    call_end = call_at + 180
    for i in range(2, int(restart_at)):
        t = float(i)
        in_call = call_at <= t < call_end
        desktop = int((1.35 + (2.95 if in_call else 0.0)) * GIB)
        collapsed = t >= call_at
        tps = 7.0 + (i % 3) if collapsed else 77.0 + (i % 5) - 2
        items.append(busy(t, tps=tps, desktop_bytes=desktop))
    items.append((float(restart_at), "restart", {"reason": "key r"}))
    items.append(idle(restart_at + 1, state=ServerState.STARTING, healthy=None))
    items.append((restart_at + 30, "ready", {}))
    for i in range(int(restart_at) + 31, int(restart_at) + 90):
        items.append(busy(float(i), tps=82.8 + (i % 3) - 1))
    return items
