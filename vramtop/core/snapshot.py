"""A sample as the JSON of `vramtop --once --json` (a contract: add fields, never rename)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from vramtop.core.door_fields import door_json
from vramtop.core.json_types import JsonObject
from vramtop.core.model import GIB, GpuDevice, ProcessMemory, Sample
from vramtop.core.windows.session_fields import windows_sample_fields


@dataclass(frozen=True)
class KvPool:
    """The KV pool as well as it is known (fields named as the `kv_pool` object's keys)."""

    bytes: int | None
    gib: float | None
    tokens: int | None
    blocks: int | None
    block_size: int | None
    usage: float | None
    max_concurrency: float | None
    max_model_len: int | None
    dtype: str | None
    source: str | None  # "metrics" (the server's own numbers), "log", or None: not known

    def to_json(self) -> JsonObject:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def kv_pool(sample: Sample) -> KvPool:
    """The KV pool as well as it is known: the server's own numbers first, the log second."""
    metrics = sample.server.metrics if sample.server else None
    cache = metrics.cache if metrics else None
    startup = sample.startup
    kv_bytes = cache.kv_cache_memory_bytes if cache else None
    source = "metrics" if kv_bytes is not None else None
    if kv_bytes is None and startup and startup.available_kv_gib is not None:
        kv_bytes = round(startup.available_kv_gib * GIB)
        source = "log"
    tokens = cache.kv_cache_size_tokens if cache else None
    if tokens is None and cache and cache.num_gpu_blocks and cache.block_size:
        tokens = cache.num_gpu_blocks * cache.block_size
    if tokens is None and startup:
        tokens = startup.kv_cache_tokens
    max_model_len = (sample.server.max_model_len if sample.server else None) or (
        sample.info.max_model_len if sample.info else None
    )
    concurrency = cache.kv_cache_max_concurrency if cache else None
    if concurrency is None and tokens and max_model_len:
        concurrency = tokens / max_model_len
    return KvPool(
        bytes=kv_bytes,
        gib=None if kv_bytes is None else round(kv_bytes / GIB, 3),
        tokens=tokens,
        blocks=cache.num_gpu_blocks if cache else None,
        block_size=cache.block_size if cache else None,
        usage=metrics.kv_cache_usage if metrics else None,
        max_concurrency=None if concurrency is None else round(concurrency, 3),
        max_model_len=max_model_len,
        dtype=(cache.cache_dtype if cache else None)
        or (sample.info.kv_cache_dtype if sample.info else None),
        source=source,
    )


def server_util(sample: Sample) -> float | None:
    """The server's --gpu-memory-utilization: as the server reports it, else as launched (a
    dead server's last report is not the budget of the one that replaces it)."""
    server = sample.server
    metrics = server.metrics if server and not server.stale else None
    if metrics and metrics.cache.gpu_memory_utilization is not None:
        return metrics.cache.gpu_memory_utilization
    if sample.info and sample.info.budget is not None:
        return sample.info.budget
    return sample.startup.requested_budget if sample.startup else None


def _device(device: GpuDevice) -> JsonObject:
    return {
        "index": device.index,
        "name": device.name,
        "total_bytes": device.total_bytes,
        "used_bytes": device.used_bytes,
        "free_bytes": device.free_bytes,
        "temperature_c": device.temperature_c,
        "sm_clock_mhz": device.sm_clock_mhz,
        "throttle": list(device.throttle),
        "processes": None
        if device.processes is None
        else [process_fields(p) for p in device.processes],
        # What the numbers describe: "dedicated" VRAM, or "unified" memory shared with the
        # system (total/used/free are then the system's MemTotal, MemTotal − MemAvailable and
        # MemAvailable). GTT: AMD only, system memory the card maps (null elsewhere).
        "memory_kind": device.memory_kind.value,
        "gtt_total_bytes": device.gtt_total_bytes,
        "gtt_used_bytes": device.gtt_used_bytes,
        # What the card says it is doing (NVML): PCIe bytes/s, utilisation as fractions.
        "pcie_rx_bytes_per_s": device.pcie_rx_bytes_per_s,
        "pcie_tx_bytes_per_s": device.pcie_tx_bytes_per_s,
        "gpu_util": device.gpu_util,
        "memory_util": device.memory_util,
    }


def card_activity_fields(device: GpuDevice) -> JsonObject:
    """The card's PCIe traffic and utilisation as a recording keeps them: only the known
    ones (a recording's optional fields)."""
    fields = {
        "pcie_rx_bytes_per_s": device.pcie_rx_bytes_per_s,
        "pcie_tx_bytes_per_s": device.pcie_tx_bytes_per_s,
        "gpu_util": device.gpu_util,
        "memory_util": device.memory_util,
    }
    return {key: value for key, value in fields.items() if value is not None}


def process_fields(p: ProcessMemory) -> JsonObject:
    """One process as JSON and in recordings (`gtt_bytes` only where the driver says)."""
    entry: JsonObject = {"pid": p.pid, "name": p.name, "used_bytes": p.used_bytes}
    if p.gtt_bytes is not None:
        entry["gtt_bytes"] = p.gtt_bytes
    return entry


def not_serving(sample: Sample) -> str | None:
    """Why the sample's server is not serving, in the reading's words; None when it is (or
    when the sample has no server to judge)."""
    server = sample.server
    if server is None:
        return None
    if not server.reachable:
        return server.error or "no answer"
    if server.healthy is False:
        return server.error or "its /health says the engine is not serving"
    if server.metrics is None or server.stale:
        return server.error or "its /metrics page could not be read"
    return None


# `server.state` of a server watched by its URL alone (no process known to vramtop) that
# does not answer; a supervised server keeps its lifecycle word (a `ServerState`).
UNREACHABLE = "unreachable"


def _state(sample: Sample) -> str | None:
    """The server's state word: its lifecycle where vramtop knows its process, `unreachable`
    for a URL that does not answer; None where nothing says (a URL that answers)."""
    if sample.info is not None:
        return sample.info.state.value
    if sample.server is not None and not sample.server.reachable:
        return UNREACHABLE
    return None


def _count(value: float | None) -> int | None:
    # Counts are whole numbers (the parser drops any other): `1`, not `1.0`.
    return None if value is None else int(value)


def snapshot(sample: Sample, *, wsl: bool, demo: bool) -> JsonObject:
    answer = _snapshot(sample, wsl=wsl, demo=demo)
    if sample.door is not None:
        # Added, only where the profile's front door answered: what it sees.
        answer["front_door"] = door_json(sample.door)
    return answer


def _snapshot(sample: Sample, *, wsl: bool, demo: bool) -> JsonObject:
    server = sample.server
    metrics = server.metrics if server else None
    info = sample.info
    split = sample.split
    return {
        "format": "vramtop-snapshot",
        "version": 1,
        "host": {"wsl": wsl, "demo": demo},
        "gpu_source": sample.gpu.source,
        "gpu_error": sample.gpu.error,
        "gpus": [_device(d) for d in sample.gpu.devices],
        # WSL2: the kernel's residency-failure lines since the previous reading (null: the
        # kernel's log is not read here).
        "residency_failures": sample.gpu.residency_failures,
        "split": None
        if split is None
        else {
            "method": split.method.value,
            "detail": split.detail,
            "total_bytes": split.total_bytes,
            "server_bytes": split.server_bytes,
            "desktop_bytes": split.desktop_bytes,
            "free_bytes": split.free_bytes,
            "budget_bytes": split.budget_bytes,
            "headroom_bytes": split.headroom_bytes,
            "memory_kind": split.memory_kind.value,
            "server_gtt_bytes": split.server_gtt_bytes,
        },
        "server": {
            "url": server.url if server else None,
            "state": _state(sample),
            "phase": info.phase if info else None,
            "pid": info.pid if info else None,
            "profile": info.profile if info else None,
            "ready_s": info.ready_s if info else None,
            "reachable": server.reachable if server else False,
            # A server that cannot be reached is not healthy, whatever it said before.
            "healthy": (server.healthy if server.reachable else False) if server else None,
            "stale": server.stale if server else False,
            "not_answering_s": server.not_answering_s if server else None,
            "error": (server.error if server else None) or (info.last_error if info else None),
            "version": (server.version if server else None)
            or (sample.startup.version if sample.startup else None),
            "model": (server.served_model if server else None)
            or (metrics.model_name if metrics else None),
            "max_model_len": server.max_model_len if server else None,
            "gpu_memory_utilization": server_util(sample),
        },
        "kv_pool": kv_pool(sample).to_json(),
        "rates": {
            "generation_tps": sample.rates.generation_tps,
            "prompt_tps": sample.rates.prompt_tps,
        },
        "requests": {
            "running": _count(metrics.requests_running) if metrics else None,
            "waiting": _count(metrics.requests_waiting) if metrics else None,
            "preemptions_total": _count(metrics.preemptions_total) if metrics else None,
        },
        # WSL2 with the Windows side watched: named desktop programs, the VM's spill.
        "windows": windows_sample_fields(sample.windows).get("windows"),
        "startup": None
        if sample.startup is None
        else {
            "weights_gib": sample.startup.weights_gib,
            "available_kv_gib": sample.startup.available_kv_gib,
            "kv_cache_tokens": sample.startup.kv_cache_tokens,
            "max_concurrency": sample.startup.max_concurrency,
            "activation_gib": sample.startup.activation_gib,
            "cudagraph_gib": sample.startup.cudagraph_gib,
            "error": sample.startup.error,
        },
    }
