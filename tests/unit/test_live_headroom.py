"""Budget what-ifs from a live server's own numbers reproduce the field report."""

from dataclasses import replace

import pytest

from vramtop.core.budget import budget_bytes
from vramtop.core.headroom.calculator import predict
from vramtop.core.headroom.live_inputs import MeasuredPool, live_headroom_inputs, pool_inputs
from vramtop.core.model import (
    GIB,
    MIB,
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

TOTAL = 32607 * MIB
POOL = round(9.26 * GIB)
TOKENS = 120_832


def live_sample(util: float = 0.93) -> Sample:
    cache = CacheConfig(
        block_size=16,
        cache_dtype="fp8",
        gpu_memory_utilization=util,
        num_gpu_blocks=TOKENS // 16,
        kv_cache_size_tokens=TOKENS,
        kv_cache_memory_bytes=POOL,
    )
    return Sample(
        t=0,
        gpu=GpuReading(devices=(GpuDevice(0, "RTX 5090", TOTAL, 30 * GIB, TOTAL - 30 * GIB),)),
        server=ServerReading(
            "u", reachable=True, metrics=ServerMetrics(cache=cache), max_model_len=163_840
        ),
    )


def test_calibration_point_is_reproduced() -> None:
    inputs = live_headroom_inputs(live_sample())
    assert inputs is not None
    now = predict(inputs, 0.93)
    assert abs(now.kv_cache_bytes - POOL) <= 16 * 2 * 41_200  # within one block
    assert abs(now.kv_cache_tokens - TOKENS) <= 16


def test_field_report_budget_cut_costs_a_quarter_of_the_pool() -> None:
    inputs = live_headroom_inputs(live_sample())
    assert inputs is not None
    lower = predict(inputs, 0.85)
    assert abs(lower.kv_cache_bytes / GIB - 6.71) < 0.02
    loss = 1 - lower.kv_cache_tokens / TOKENS
    assert 0.26 < loss < 0.29
    assert lower.desktop_headroom_bytes > predict(inputs, 0.93).desktop_headroom_bytes + 2.4 * GIB


def test_unknown_pool_gives_no_inputs() -> None:
    sample = live_sample()
    bare = Sample(t=0, gpu=sample.gpu, server=ServerReading("u", reachable=False))
    assert live_headroom_inputs(bare) is None


def test_a_failed_starts_budget_is_not_paired_with_the_last_pool_known() -> None:
    # A relaunch at 0.94 failed (out of memory at startup): the pool shown is still the one
    # the server at 0.85 reported, its reading stale, while the record says 0.94.
    running = live_sample(0.85)
    assert running.server is not None
    stale = replace(running.server, reachable=False, stale=True)
    failed = ServerInfo(state=ServerState.CRASHED, budget=0.94)
    inputs = live_headroom_inputs(replace(running, server=stale, info=failed))
    assert inputs is not None
    back = predict(inputs, 0.85)
    assert abs(back.kv_cache_bytes - POOL) <= 16 * 2 * 41_200  # the pool it had at 0.85


def test_a_pool_from_the_startup_log_goes_with_the_budget_that_run_printed() -> None:
    # The server at 0.93 is stopped and the record already holds the next start's 0.85: no
    # reading of /metrics, the pool known only from the log of the run at 0.93.
    sample = live_sample()
    log = StartupFacts(available_kv_gib=9.26, kv_cache_tokens=TOKENS, requested_budget=0.93)
    record = ServerInfo(state=ServerState.STOPPED, budget=0.85)
    inputs = live_headroom_inputs(replace(sample, server=None, startup=log, info=record))
    assert inputs is not None
    at_the_logs_budget = predict(inputs, 0.93)
    assert abs(at_the_logs_budget.kv_cache_bytes - POOL) <= 16 * 2 * 41_200
    assert abs(predict(inputs, 0.85).kv_cache_bytes / GIB - 6.71) < 0.02


def test_a_pool_from_the_log_beside_metrics_without_one_goes_with_the_logs_budget() -> None:
    # A vLLM whose /metrics gives no pool: the pool is the log's, its budget the log's too,
    # even where the reading (stale: that server crashed) and the record say otherwise.
    sample = live_sample(0.85)
    assert sample.server is not None and sample.server.metrics is not None
    cache = replace(sample.server.metrics.cache, kv_cache_memory_bytes=None)
    metrics = replace(sample.server.metrics, cache=cache)
    stale = replace(sample.server, reachable=False, stale=True, metrics=metrics)
    log = StartupFacts(available_kv_gib=9.26, kv_cache_tokens=TOKENS, requested_budget=0.93)
    record = ServerInfo(state=ServerState.CRASHED, budget=0.85)
    inputs = live_headroom_inputs(replace(sample, server=stale, startup=log, info=record))
    assert inputs is not None
    assert abs(predict(inputs, 0.93).kv_cache_bytes - POOL) <= 16 * 2 * 41_200


def test_a_measured_pool_is_one_value_the_calibration_starts_from() -> None:
    pool = MeasuredPool(
        total_bytes=TOTAL,
        budget=0.93,
        kv_bytes=POOL,
        tokens=TOKENS,
        kv_cache_dtype="fp8",
        block_size=16,
        max_model_len=163_840,
        startup=None,
        outside_budget_bytes=512 * MIB,
    )
    inputs = pool_inputs(pool)
    # No startup terms: the fixed terms are one measured lump, the budget less the pool.
    assert inputs.weights_bytes == budget_bytes(TOTAL, 0.93) - POOL
    assert predict(inputs, 0.93).kv_cache_tokens == pytest.approx(TOKENS, rel=0.01)
    assert hash(pool) == hash(replace(pool)) and pool_inputs(replace(pool)) == inputs
