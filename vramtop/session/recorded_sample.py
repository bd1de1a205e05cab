"""A recorded sample's fields read back into typed values: its GPUs, split, server and front
door, as `session_reader` finds them on each line. Tolerant as the format asks: a field that
is absent or of the wrong kind is "not known"."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vramtop.core.diagnosis.normal_rate import REMEMBERED, NormalRate
from vramtop.core.door_fields import door_from_json
from vramtop.core.model import (
    CacheConfig,
    DoorReading,
    GpuDevice,
    MemoryKind,
    ProcessMemory,
    ServerInfo,
    ServerMetrics,
    ServerReading,
    ServerState,
    Split,
    SplitMethod,
)


@dataclass(frozen=True)
class SessionHeader:
    started_at: str | None
    version: int
    wsl: bool | None
    gpus: tuple[Mapping[str, object], ...]
    server: Mapping[str, object] | None
    raw: Mapping[str, object] = field(default_factory=dict)

    @property
    def normal_rate(self) -> NormalRate | None:
        """The optional `normal_rate`: the normal decode speed the recording compared with
        from its first second (None when absent or unusable)."""
        return NormalRate.from_json(self.raw.get("normal_rate"), source=REMEMBERED)


def read_number(obj: Mapping[str, object], key: str) -> float | None:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)  # an integer of 400 digits overflows
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _int(obj: Mapping[str, object], key: str) -> int | None:
    value = read_number(obj, key)
    return None if value is None else int(value)


def read_device(g: Mapping[str, object], header: SessionHeader) -> GpuDevice | None:
    index = _int(g, "index") or 0
    total = _int(g, "total_bytes")
    if total is None:
        total = next((_int(h, "total_bytes") for h in header.gpus if h.get("index") == index), None)
    used = _int(g, "used_bytes")
    if total is None or used is None:
        return None
    name = next((str(h.get("name")) for h in header.gpus if h.get("index") == index), "GPU")
    procs = g.get("processes")
    processes = None
    if isinstance(procs, list):
        processes = tuple(
            ProcessMemory(
                _int(p, "pid") or 0,
                str(p.get("name", "")),
                _int(p, "used_bytes") or 0,
                gtt_bytes=_int(p, "gtt_bytes"),
            )
            for p in procs
            if isinstance(p, dict)
        )
    throttle = g.get("throttle")
    return GpuDevice(
        index=index,
        name=name,
        total_bytes=total,
        used_bytes=used,
        free_bytes=max(0, total - used),
        temperature_c=_int(g, "temperature_c"),
        sm_clock_mhz=_int(g, "sm_clock_mhz"),
        throttle=tuple(str(r) for r in throttle) if isinstance(throttle, list) else (),
        processes=processes,
        memory_kind=_memory_kind(g.get("memory_kind")),
        gtt_used_bytes=_int(g, "gtt_used_bytes"),
        pcie_rx_bytes_per_s=read_count(g, "pcie_rx_bytes_per_s"),
        pcie_tx_bytes_per_s=read_count(g, "pcie_tx_bytes_per_s"),
        gpu_util=_fraction(g, "gpu_util"),
        memory_util=_fraction(g, "memory_util"),
    )


def read_door(value: Any) -> DoorReading | None:
    """A sample's front door (added; absent in older recordings and where none answered)."""
    if not isinstance(value, dict):
        return None
    address = value.get("address")
    return door_from_json(address if isinstance(address, str) else "", value)


def read_count(obj: Mapping[str, object], key: str) -> int | None:
    """An optional count or rate that cannot be negative (None when absent or wrong)."""
    value = _int(obj, key)
    return value if value is not None and value >= 0 else None


def _fraction(obj: Mapping[str, object], key: str) -> float | None:
    """An optional fraction, 0..1 (None when absent or outside)."""
    value = read_number(obj, key)
    return value if value is not None and 0.0 <= value <= 1.0 else None


def _memory_kind(value: Any) -> MemoryKind:
    """A recorded memory kind; dedicated when absent (older recordings) or unknown."""
    try:
        return MemoryKind(str(value)) if value is not None else MemoryKind.DEDICATED
    except ValueError:
        return MemoryKind.DEDICATED


def read_split(g: Mapping[str, object], device: GpuDevice, util: float | None) -> Split | None:
    server = _int(g, "server_bytes")
    desktop = _int(g, "desktop_bytes")
    if desktop is None and server is not None:
        desktop = max(0, device.used_bytes - server)
    if server is None and desktop is None:
        return None
    method = SplitMethod.PER_PROCESS if device.processes is not None else SplitMethod.DERIVED
    budget = math.ceil(device.total_bytes * util) if util is not None else None
    return Split(
        total_bytes=device.total_bytes,
        server_bytes=server,
        desktop_bytes=desktop,
        free_bytes=device.free_bytes,
        method=method,
        detail="As recorded.",
        budget_bytes=budget,
        headroom_bytes=_int(g, "headroom_bytes"),
        memory_kind=device.memory_kind,
        server_gtt_bytes=_int(g, "server_gtt_bytes"),
    )


def read_server(
    s: Mapping[str, object], header: SessionHeader
) -> tuple[ServerReading | None, ServerInfo | None]:
    try:
        state = ServerState(str(s.get("state")))
    except ValueError:
        state = None
    util = read_number(s, "gpu_memory_utilization")
    hs = header.server or {}
    metrics = ServerMetrics(
        generation_tokens_total=read_number(s, "generation_tokens_total"),
        prompt_tokens_total=read_number(s, "prompt_tokens_total"),
        requests_running=read_number(s, "requests_running"),
        requests_waiting=read_number(s, "requests_waiting"),
        preemptions_total=read_number(s, "preemptions_total"),
        kv_cache_usage=read_number(s, "kv_cache_usage"),
        inter_token_latency_sum_s=read_number(s, "inter_token_latency_sum_s"),
        inter_token_latency_count=read_number(s, "inter_token_latency_count"),
        cache=CacheConfig(
            gpu_memory_utilization=util,
            kv_cache_size_tokens=_int(s, "kv_cache_tokens"),
            kv_cache_memory_bytes=_int(s, "kv_cache_memory_bytes"),
        ),
    )
    has_metrics = any(
        v is not None
        for v in (
            metrics.generation_tokens_total,
            metrics.requests_running,
            metrics.kv_cache_usage,
        )
    )
    healthy = flag if isinstance(flag := s.get("healthy"), bool) else None
    # Written only while the server answered; no state (monitor only) counts as running.
    silent = read_number(s, "not_answering_s")
    reachable = (
        state in (ServerState.RUNNING, None)
        and (has_metrics or healthy is not None)
        and silent is None  # a server that answers nothing was not reached
    )
    reading = ServerReading(
        url=str(hs.get("url", "")),
        reachable=reachable,
        healthy=healthy,
        metrics=metrics if has_metrics else None,
        stale=bool(s.get("stale", False)),
        not_answering_s=silent,
    )
    argv_raw = hs.get("argv")
    argv: list[object] = argv_raw if isinstance(argv_raw, list) else []
    info = None
    if state is not None:
        info = ServerInfo(
            state=state,
            pid=_int(s, "pid"),
            argv=tuple(str(w) for w in argv),
            budget=util if util is not None else read_number(hs, "gpu_memory_utilization"),
            max_model_len=_int(hs, "max_model_len"),
            kv_cache_dtype=dtype if isinstance(dtype := hs.get("kv_cache_dtype"), str) else None,
        )
    return reading, info
