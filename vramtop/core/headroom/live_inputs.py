"""Headroom-model inputs from what a running server shows, for the console's what-ifs.

A live server tells its pool (bytes and tokens, from /metrics or its startup log) at its
current budget. That is enough to answer budget what-ifs exactly: the bytes per token are
measured, and the fixed terms (weights, non-torch, activation, graphs) come from the startup
log where it prints them, else as one measured lump (budget − pool), which is all a budget
what-if needs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from vramtop.core.budget import budget_bytes, outside_budget
from vramtop.core.headroom.calculator import calibrate, predict
from vramtop.core.headroom.from_startup import inputs_from_startup
from vramtop.core.headroom.terms import (
    Architecture,
    HeadroomError,
    HeadroomInputs,
    kv_element_bytes,
)
from vramtop.core.model import Sample, StartupFacts
from vramtop.core.snapshot import kv_pool, server_util


@dataclass(frozen=True)
class MeasuredPool:
    """A KV pool a server really got and what it was got with: what a calibration starts
    from. Frozen and hashable, so that the calibrations of the last few are kept."""

    total_bytes: int
    """The card's memory."""
    budget: float
    """The budget the pool was measured at (its --gpu-memory-utilization)."""
    kv_bytes: int
    tokens: int
    kv_cache_dtype: str
    block_size: int
    max_model_len: int
    startup: StartupFacts | None
    """The startup log's facts where it prints the terms (the weights among them)."""
    outside_budget_bytes: int
    served_dtype: str | None = None


def measured_architecture(
    kv_bytes: int, tokens: int, kv_cache_dtype: str, served_dtype: str | None = None
) -> Architecture:
    """An attention layout with the measured bytes per token (the real layout is unknown
    without the model's config.json; for budget what-ifs only bytes per token matter)."""
    element = kv_element_bytes(kv_cache_dtype, "bfloat16", served_dtype)
    head_dim = max(1, round(kv_bytes / tokens / (2 * element)))
    return Architecture(full_attention_layers=1, kv_heads=1, head_dim=head_dim, name="measured")


def live_headroom_inputs(
    sample: Sample, outside_budget_bytes: int | None = None
) -> HeadroomInputs | None:
    """Calibrated inputs for the sample's server, or None while its pool is not known.

    `outside_budget_bytes`: what the server was measured to hold beyond its budget (the
    diagnosis learns it); the estimate when None. Every budget's desktop headroom counts it.
    """
    if not sample.gpu.devices:
        return None
    total = sample.gpu.devices[0].total_bytes
    pool = kv_pool(sample)
    util = _pool_util(sample, pool.source)
    kv_bytes, tokens = pool.bytes, pool.tokens
    if util is None or not kv_bytes or not tokens:
        return None
    startup = sample.startup
    inputs = _calibrated(
        MeasuredPool(
            total_bytes=total,
            budget=util,
            kv_bytes=kv_bytes,
            tokens=tokens,
            kv_cache_dtype=pool.dtype or "auto",
            block_size=pool.block_size or 16,
            max_model_len=pool.max_model_len or 8192,
            startup=startup if startup is not None and startup.weights_gib is not None else None,
            outside_budget_bytes=outside_budget(outside_budget_bytes),
        )
    )
    if inputs is None:
        return None
    concurrency = _reported_concurrency(sample, inputs.max_model_len)
    if concurrency is not None:
        return with_reported_concurrency(inputs, util, kv_bytes, concurrency)
    if _serving(sample) and not predict(inputs, util).fits:
        # It serves with this pool, so vLLM's startup check passed: one request of its
        # --max-model-len fits, whatever its printed token count says (a hybrid model's is
        # conservative). Taken at that bound, the most it can need.
        return replace(inputs, request_bytes_per_token=kv_bytes / inputs.max_model_len)
    return inputs


def _serving(sample: Sample) -> bool:
    """The server answered this sample with its pool: it started."""
    server = sample.server
    return (
        server is not None
        and server.reachable
        and not server.stale
        and server.metrics is not None
        and server.metrics.cache.kv_cache_memory_bytes is not None
    )


def _reported_concurrency(sample: Sample, max_model_len: int | None) -> float | None:
    """The maximum concurrency the server itself reported for `max_model_len`-token requests
    (its cache_config_info, else its startup line when that names the same length)."""
    metrics = sample.server.metrics if sample.server else None
    if metrics is not None and metrics.cache.kv_cache_max_concurrency:
        return metrics.cache.kv_cache_max_concurrency
    startup = sample.startup
    if (
        startup is not None
        and startup.max_concurrency
        and startup.max_concurrency_len is not None
        and startup.max_concurrency_len == max_model_len
    ):
        return startup.max_concurrency
    return None


# Reported and predicted concurrency within this of each other: the layout is the server's
# (vLLM prints two decimals).
_CONCURRENCY_TOLERANCE = 0.03


def with_reported_concurrency(
    inputs: HeadroomInputs, util: float, kv_bytes: int, concurrency: float
) -> HeadroomInputs:
    """Inputs whose one-request memory is the one the server's reported maximum concurrency
    implies, where that differs from what its token count implies: a hybrid model (recurrent
    layers hold no tokens; vLLM prints a conservative token count) is judged by memory, as
    vLLM's own startup check judges it."""
    predicted = predict(inputs, util).max_concurrency
    if concurrency <= 0 or abs(predicted / concurrency - 1) <= _CONCURRENCY_TOLERANCE:
        return inputs
    per_token = kv_bytes / (concurrency * inputs.max_model_len)
    return replace(inputs, request_bytes_per_token=per_token)


def _pool_util(sample: Sample, source: str | None) -> float | None:
    """The budget the pool was measured at, by where `kv_pool` read the pool (`source`). A
    pool from /metrics is that server's, stale too (a start that failed shows the last pool
    known), so it goes with the budget in the same reading, not the failed start's: paired
    with the latter, a relaunch at the old budget was predicted a pool smaller by the
    budgets' difference. A pool from the startup log goes with the budget that run printed,
    not the record's (another run's, or one about to start). Where the source gives none,
    the server's budget."""
    if source == "metrics":
        metrics = sample.server.metrics if sample.server else None
        if metrics is not None and metrics.cache.gpu_memory_utilization:
            return metrics.cache.gpu_memory_utilization
    if source == "log" and sample.startup is not None and sample.startup.requested_budget:
        return sample.startup.requested_budget
    return server_util(sample)


# The console asks on every tick; the answer changes only with the pool, the budget or a new
# start, so the last few answers are kept.
@lru_cache(maxsize=8)
def _calibrated(pool: MeasuredPool) -> HeadroomInputs | None:
    try:
        return pool_inputs(pool)
    except HeadroomError:
        return None


def pool_inputs(pool: MeasuredPool) -> HeadroomInputs:
    """Inputs calibrated to a pool a server really got: the terms from the startup log where
    it prints them, else one measured lump (budget − pool). Raises HeadroomError for numbers
    the model cannot use."""
    architecture = measured_architecture(
        pool.kv_bytes, pool.tokens, pool.kv_cache_dtype, pool.served_dtype
    )
    startup = pool.startup
    if startup is not None and startup.weights_gib is not None:
        inputs = inputs_from_startup(
            startup,
            pool.total_bytes,
            architecture,
            kv_cache_dtype=pool.kv_cache_dtype,
            block_size=pool.block_size,
            max_model_len=pool.max_model_len,
            outside_budget_bytes=pool.outside_budget_bytes,
        )
    else:
        inputs = HeadroomInputs(
            total_bytes=pool.total_bytes,
            architecture=architecture,
            weights_bytes=max(0, budget_bytes(pool.total_bytes, pool.budget) - pool.kv_bytes),
            non_torch_bytes=0,
            activation_bytes=0,
            cudagraph_bytes=0,
            outside_budget_bytes=pool.outside_budget_bytes,
            kv_cache_dtype=pool.kv_cache_dtype,
            block_size=pool.block_size,
            max_model_len=pool.max_model_len,
        )
    inputs = replace(inputs, served_dtype=pool.served_dtype)
    return calibrate(inputs, pool.budget, pool.kv_bytes, pool.tokens)
