import json

from vramtop.core.model import (
    GIB,
    CacheConfig,
    GpuDevice,
    GpuReading,
    Sample,
    ServerInfo,
    ServerMetrics,
    ServerReading,
    ServerState,
    StartupFacts,
)
from vramtop.core.snapshot import kv_pool, server_util, snapshot

GPU = GpuReading(devices=(GpuDevice(0, "gpu", 32 * GIB, 30 * GIB, 2 * GIB),), source="sim")


def test_kv_pool_prefers_the_servers_own_numbers_over_the_log() -> None:
    cache = CacheConfig(
        kv_cache_memory_bytes=9 * GIB,
        kv_cache_size_tokens=120832,
        num_gpu_blocks=7552,
        block_size=16,
    )
    sample = Sample(
        t=0,
        gpu=GPU,
        server=ServerReading(
            "u", reachable=True, metrics=ServerMetrics(cache=cache), max_model_len=163840
        ),
        startup=StartupFacts(available_kv_gib=8.0, kv_cache_tokens=1),
    )
    pool = kv_pool(sample)
    assert pool.bytes == 9 * GIB and pool.source == "metrics"
    assert pool.tokens == 120832
    assert abs(pool.max_concurrency - 120832 / 163840) < 1e-3


def test_kv_pool_falls_back_to_the_startup_log_and_blocks() -> None:
    cache = CacheConfig(num_gpu_blocks=100, block_size=16)
    sample = Sample(
        t=0,
        gpu=GPU,
        server=ServerReading("u", reachable=True, metrics=ServerMetrics(cache=cache)),
        startup=StartupFacts(available_kv_gib=9.26),
        info=ServerInfo(state=ServerState.RUNNING, max_model_len=800),
    )
    pool = kv_pool(sample)
    assert pool.source == "log" and pool.gib == 9.26
    assert pool.tokens == 1600
    assert pool.max_concurrency == 2.0


def test_util_comes_from_the_server_then_the_launch_then_the_log() -> None:
    info = ServerInfo(state=ServerState.RUNNING, budget=0.85)
    assert (
        server_util(Sample(t=0, gpu=GPU, info=info, startup=StartupFacts(requested_budget=0.9)))
        == 0.85
    )
    assert server_util(Sample(t=0, gpu=GPU, startup=StartupFacts(requested_budget=0.9))) == 0.9
    assert server_util(Sample(t=0, gpu=GPU)) is None


def test_snapshot_is_json_and_keeps_unknowns_as_null() -> None:
    data = snapshot(
        Sample(t=0, gpu=GpuReading(source="nvml", error="NVML is not available")),
        wsl=True,
        demo=False,
    )
    text = json.dumps(data)
    assert json.loads(text)["gpu_error"] == "NVML is not available"
    assert data["split"] is None and data["kv_pool"]["tokens"] is None
    assert data["host"] == {"wsl": True, "demo": False}
