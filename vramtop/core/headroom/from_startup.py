"""A parsed vLLM startup log as the calculator's inputs, calibrated to the pool it got."""

from __future__ import annotations

from vramtop.core.budget import GIB
from vramtop.core.headroom.calculator import calibrate
from vramtop.core.headroom.terms import Architecture, HeadroomError, HeadroomInputs
from vramtop.core.model import StartupFacts


def gib(value: float) -> int:
    return round(value * GIB)


def inputs_from_startup(
    facts: StartupFacts,
    total_bytes: int | None,
    architecture: Architecture,
    *,
    kv_cache_dtype: str = "auto",
    block_size: int = 16,
    max_model_len: int | None = None,
    max_num_batched_tokens: int = 8192,
    tensor_parallel_size: int = 1,
    enforce_eager: bool = False,
    outside_budget_bytes: int | None = None,
) -> HeadroomInputs:
    """Inputs measured from a parsed vLLM startup log, calibrated to the pool it got.

    The 0.28+ summary line gives every term; older logs give weights and the pool, and the
    rest is estimated (and labelled) — the calibration still makes budget what-ifs exact.
    """
    if total_bytes is None:
        if facts.startup_total_gib is None:
            raise HeadroomError("the card's total memory is unknown (not in the log)")
        total_bytes = gib(facts.startup_total_gib)
    if facts.weights_gib is None:
        raise HeadroomError("the log has no 'Model loading took … GiB' line")
    non_torch = None
    if facts.consumed_gib is not None:
        non_torch = max(0, gib(facts.consumed_gib) - gib(facts.weights_gib))
    cudagraph = gib(facts.cudagraph_gib) if facts.cudagraph_gib is not None else None
    if cudagraph is None and facts.cudagraph_equivalent_util is not None:
        with_graphs, without = facts.cudagraph_equivalent_util
        cudagraph = max(0, round((with_graphs - without) * total_bytes))
    inputs = HeadroomInputs(
        total_bytes=total_bytes,
        architecture=architecture,
        weights_bytes=gib(facts.weights_gib),
        non_torch_bytes=non_torch,
        activation_bytes=gib(facts.activation_gib) if facts.activation_gib is not None else None,
        cudagraph_bytes=cudagraph,
        outside_budget_bytes=outside_budget_bytes,
        kv_cache_dtype=kv_cache_dtype,
        block_size=block_size,
        max_model_len=max_model_len or facts.max_concurrency_len or 8192,
        max_num_batched_tokens=max_num_batched_tokens,
        tensor_parallel_size=tensor_parallel_size,
        enforce_eager=enforce_eager,
        vllm_version=facts.version,
    )
    if facts.requested_budget is None:
        return inputs
    kv = gib(facts.available_kv_gib) if facts.available_kv_gib is not None else None
    return calibrate(inputs, facts.requested_budget, kv, facts.kv_cache_tokens)
