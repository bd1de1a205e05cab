"""The headroom calculator: what a budget gives vLLM's KV pool and leaves the desktop.

Follows vLLM's own accounting (v1 engine). All byte terms are per GPU:

    budget = ceil(total × util)
    kv_pool = budget − weights − non_torch − peak activation − CUDA-graph estimate
    num_blocks = kv_pool // page // layers_per_group
    tokens = num_blocks // groups × block_size          (what "GPU KV cache size" prints)
    max_concurrency = num_blocks / pages one max-model-len request needs

Every term that depends on the budget is the budget itself: the others are constant, so once
one real pool is known (calibration), every other budget follows exactly up to vLLM's rounding.

Layer groups. vLLM gives each kind of layer its own block table and shares one pool of pages
between them (`_get_kv_cache_groups_uniform_page_size`): with F full-attention and S
sliding-window layers it makes groups of min(F, S) layers. The printed token count is
num_blocks // groups × block_size, which for an even split equals the all-full-attention
formula: sliding-window layers do not raise the printed capacity, they lower what one request
holds (window + batch, not the whole context) and so change the max concurrency. Checked
against a real gemma-2-9b log (21 sliding + 21 full, 168,880 tokens and 20.60x).

Hybrid models (Gated DeltaNet / Mamba layers with a few attention layers): each recurrent layer
holds one fixed-size state per running request. vLLM makes the attention page at least as large
as that state (block size raised to 16 × ceil(state / (16 × bytes per token))) and pads the
state to the attention page (`HybridAttentionMambaModelConfig`), so each recurrent group takes
one full page per request. Newer releases align block sizes to kernel sizes in other ways and
prefix caching in "align" mode keeps more state: this part is approximate.

Tensor parallelism: each GPU holds kv_heads / tp heads (at least one) of every token, so the
printed token count is one GPU's capacity, not multiplied by tp. MLA keeps one latent "head"
per token (kv_lora_rank + qk_rope_head_dim values, no separate V) on every GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from vramtop.core.budget import (
    LOG_ROUNDING_BYTES,
    OUTSIDE_BUDGET_ESTIMATE_BYTES,
    budget_bytes,
    desktop_headroom_bytes,
    largest_util_leaving,
)
from vramtop.core.headroom.startup_checks import (
    Refusal,
    free_memory_refusal,
    longest_that_fits,
    pool_refusal,
)
from vramtop.core.headroom.terms import (
    CUDAGRAPH_ESTIMATE_BYTES,
    HeadroomError,
    HeadroomInputs,
    Prediction,
    cudagraph_subtracted,
    dtype_bytes,
    estimate_activation_bytes,
    estimate_non_torch_bytes,
    kv_element_bytes,
    model_dtype_bytes,
)


@dataclass(frozen=True)
class _Layout:
    """vLLM's KV cache geometry for one configuration (see the module docstring)."""

    page_bytes: int  # one block of one layer
    block_size: int  # attention tokens per block
    layers_per_group: int
    groups: tuple[str, ...]  # "full", "sliding", "recurrent" per group
    min_block_size: int
    pages_per_request: int
    recurrent_page_bytes: int  # unpadded state of one recurrent layer

    def num_blocks(self, kv_bytes: int) -> int:
        return max(0, kv_bytes // self.page_bytes // self.layers_per_group)

    def tokens(self, num_blocks: int) -> int:
        return num_blocks // len(self.groups) * self.min_block_size

    def block_range_for_tokens(self, tokens: int) -> tuple[int, int]:
        """The num_blocks values that print this token count (inclusive)."""
        per_group = tokens // self.min_block_size
        return per_group * len(self.groups), (per_group + 1) * len(self.groups) - 1

    @property
    def bytes_per_block(self) -> int:
        return self.page_bytes * self.layers_per_group


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _kv_element_bytes(inputs: HeadroomInputs) -> int:
    return kv_element_bytes(inputs.kv_cache_dtype, inputs.architecture.dtype, inputs.served_dtype)


def _layout(inputs: HeadroomInputs) -> _Layout:
    arch = inputs.architecture
    tp = inputs.tensor_parallel_size
    heads = 1 if arch.mla else max(1, arch.kv_heads // tp)
    kv_sides = 1 if arch.mla else 2  # MLA stores one latent vector, not K and V
    bytes_per_token = heads * arch.head_dim * kv_sides * _kv_element_bytes(inputs)
    block_size = inputs.block_size
    recurrent_page = 0
    if arch.recurrent_layers:
        state_bytes = model_dtype_bytes(arch.dtype)
        ssm_bytes = dtype_bytes(arch.recurrent_ssm_dtype) if arch.recurrent_ssm_dtype else None
        recurrent_page = arch.recurrent_conv_elements // tp * state_bytes + (
            arch.recurrent_ssm_elements // tp * (ssm_bytes or state_bytes)
        )
        if arch.attention_layers:
            # HybridAttentionMambaModelConfig: attention page >= state, multiple of 16 tokens.
            needed = 16 * _cdiv(recurrent_page, 16 * bytes_per_token)
            block_size = max(block_size, needed)
    page = block_size * bytes_per_token if arch.attention_layers else recurrent_page
    counts = {
        "full": arch.full_attention_layers,
        "sliding": arch.sliding_attention_layers,
        "recurrent": arch.recurrent_layers,
    }
    counts = {kind: n for kind, n in counts.items() if n > 0}
    if not counts:
        raise HeadroomError("the architecture has no layers that keep a KV cache or state")
    if len(counts) == 1:
        group_size = next(iter(counts.values()))
    else:
        smallest, largest = min(counts.values()), max(counts.values())
        group_size = largest if largest < smallest * 1.5 else smallest
    groups = tuple(kind for kind, n in counts.items() for _ in range(_cdiv(n, group_size)))
    # A recurrent layer's block is the whole context (mamba_block_size = max_model_len).
    min_block = min(block_size if g != "recurrent" else inputs.max_model_len for g in groups)
    return _Layout(
        page_bytes=page,
        block_size=block_size,
        layers_per_group=group_size,
        groups=groups,
        min_block_size=min_block,
        pages_per_request=sum(
            _pages_per_request(g, inputs, block_size, inputs.max_model_len) for g in groups
        ),
        recurrent_page_bytes=recurrent_page,
    )


def _pages_per_request(
    group: str, inputs: HeadroomInputs, block_size: int, max_model_len: int
) -> int:
    """The pages of `group` one request of `max_model_len` tokens takes."""
    if group == "recurrent":
        return 1
    if group == "sliding" and inputs.architecture.sliding_window:
        # SlidingWindowSpec.max_memory_usage_bytes: window + one scheduled batch, +1 block
        # because the window need not start on a block boundary.
        window = inputs.architecture.sliding_window - 1 + inputs.max_num_batched_tokens
        return _cdiv(min(window, max_model_len), block_size) + 1
    return _cdiv(max_model_len, block_size)


@dataclass(frozen=True)
class _Terms:
    non_torch: int
    activation: int
    cudagraph: int
    outside: int
    estimated: tuple[str, ...]


def _terms(inputs: HeadroomInputs) -> _Terms:
    estimated: list[str] = ["weights"] if inputs.weights_estimated else []
    non_torch = inputs.non_torch_bytes
    if non_torch is None:
        non_torch = estimate_non_torch_bytes(inputs.tensor_parallel_size)
        estimated.append("non_torch")
    activation = inputs.activation_bytes
    if activation is None:
        activation = estimate_activation_bytes(
            inputs.max_num_batched_tokens, inputs.architecture.vocab_size
        )
        estimated.append("activation")
    cudagraph = inputs.cudagraph_bytes
    if not cudagraph_subtracted(inputs.vllm_version, inputs.enforce_eager):
        cudagraph = 0  # a rule of that release, not an estimate
    elif cudagraph is None:
        cudagraph = CUDAGRAPH_ESTIMATE_BYTES
        estimated.append("cudagraph")
    outside = inputs.outside_budget_bytes
    if outside is None:
        outside = OUTSIDE_BUDGET_ESTIMATE_BYTES
        estimated.append("outside_budget")
    return _Terms(non_torch, activation, cudagraph, outside, tuple(estimated))


def _check(inputs: HeadroomInputs, util: float) -> None:
    if not 0 < util <= 1:
        raise HeadroomError(f"utilization {util} is outside (0, 1]")
    if inputs.total_bytes <= 0:
        raise HeadroomError("the card's total memory must be positive")
    for name in ("weights_bytes", "non_torch_bytes", "activation_bytes", "cudagraph_bytes"):
        value = getattr(inputs, name)
        if value is not None and value < 0:
            raise HeadroomError(f"{name.removesuffix('_bytes')} cannot be negative")
    if inputs.outside_budget_bytes is not None and inputs.outside_budget_bytes < 0:
        raise HeadroomError("outside-budget memory cannot be negative")
    for name in ("block_size", "max_model_len", "max_num_batched_tokens", "tensor_parallel_size"):
        if getattr(inputs, name) < 1:
            raise HeadroomError(f"{name} must be at least 1")
    arch = inputs.architecture
    if min(arch.full_attention_layers, arch.sliding_attention_layers, arch.recurrent_layers) < 0:
        raise HeadroomError("layer counts cannot be negative")
    if arch.attention_layers and (arch.kv_heads < 1 or arch.head_dim < 1):
        raise HeadroomError("kv heads and head dim must be at least 1")


def predict(inputs: HeadroomInputs, util: float) -> Prediction:
    """What vLLM will make of this budget: pool, blocks, tokens, concurrency, desktop share."""
    _check(inputs, util)
    terms = _terms(inputs)
    layout = _layout(inputs)
    budget = budget_bytes(inputs.total_bytes, util)
    left = (
        budget
        - inputs.weights_bytes
        - terms.non_torch
        - terms.activation
        - terms.cudagraph
        - inputs.calibration_bytes
    )
    kv = max(0, left)  # a pool is never below 0: what is missing is the shortfall
    blocks = layout.num_blocks(kv)
    request = _request_bytes(inputs, layout)
    concurrency = (
        blocks / layout.pages_per_request
        if inputs.request_bytes_per_token is None
        else kv / request
    )
    return Prediction(
        budget=util,
        budget_bytes=budget,
        kv_cache_bytes=kv,
        num_blocks=blocks,
        kv_cache_tokens=layout.tokens(blocks),
        max_concurrency=concurrency,
        desktop_headroom_bytes=desktop_headroom_bytes(inputs.total_bytes, util, terms.outside),
        estimated=terms.estimated,
        block_size=layout.block_size,
        weights_bytes=inputs.weights_bytes,
        non_torch_bytes=terms.non_torch,
        activation_bytes=terms.activation,
        cudagraph_bytes=terms.cudagraph,
        outside_budget_bytes=terms.outside,
        recurrent_state_bytes_per_request=layout.recurrent_page_bytes
        * inputs.architecture.recurrent_layers,
        calibrated=inputs.calibrated_budget is not None,
        max_model_len=inputs.max_model_len,
        request_bytes=request,
        kv_shortfall_bytes=max(0, -left),
    )


def _request_bytes(inputs: HeadroomInputs, layout: _Layout) -> int:
    """The memory one request of `max_model_len` needs: each group's pages for it (vLLM's
    `max_memory_usage_bytes`, summed over the layers), or the measured bytes per token."""
    if inputs.request_bytes_per_token is not None:
        return max(1, math.ceil(inputs.request_bytes_per_token * inputs.max_model_len))
    return layout.pages_per_request * layout.bytes_per_block


def request_bytes(inputs: HeadroomInputs, max_model_len: int) -> int:
    """The memory one request of `max_model_len` tokens needs in the KV pool."""
    return request_bytes_by_length(inputs)(max_model_len)


def request_bytes_by_length(inputs: HeadroomInputs) -> Callable[[int], int]:
    """`request_bytes` for any length, the layout made once: a request's length changes only
    how many pages it takes (a bisection over lengths asks dozens of them, on every tick of
    an open collapse)."""
    per_token = inputs.request_bytes_per_token
    if per_token is not None:
        return lambda n: max(1, math.ceil(per_token * n))
    layout = _layout(inputs)

    def needed(n: int) -> int:
        pages = sum(_pages_per_request(g, inputs, layout.block_size, n) for g in layout.groups)
        return pages * layout.bytes_per_block

    return needed


def estimated_max_model_len(inputs: HeadroomInputs, kv_cache_bytes: int) -> int:
    """vLLM's "estimated maximum model length": the longest request (up to the configured
    --max-model-len) whose memory fits in `kv_cache_bytes`; 0 when not one token fits."""
    return longest_that_fits(kv_cache_bytes, inputs.max_model_len, request_bytes_by_length(inputs))


def startup_refusal(
    inputs: HeadroomInputs, util: float, free_bytes: int | None = None
) -> Refusal | None:
    """What vLLM would refuse a start at `util` with (its free-memory check only when the
    memory free to it is known), in vLLM's words; None: it starts."""
    p = predict(inputs, util)
    if free_bytes is not None:
        refused = free_memory_refusal(free_bytes, inputs.total_bytes, util, p.budget_bytes)
        if refused is not None:
            return refused
    return pool_refusal(
        p.kv_cache_bytes, p.num_blocks, inputs.max_model_len, request_bytes_by_length(inputs)
    )


def calibrate(
    inputs: HeadroomInputs,
    util: float,
    kv_cache_bytes: int | None = None,
    kv_cache_tokens: int | None = None,
    rounding_bytes: int = LOG_ROUNDING_BYTES,
) -> HeadroomInputs:
    """Pin the model to a pool vLLM really got at `util`.

    `kv_cache_bytes` is the logged pool (± `rounding_bytes`, its print rounding); the logged
    token count narrows it to one block when both agree. The difference to what the terms
    imply goes into `calibration_bytes`, so `predict(result, util)` reproduces the log.
    """
    if kv_cache_bytes is None and kv_cache_tokens is None:
        return inputs
    layout = _layout(inputs)
    low, high = -math.inf, math.inf
    if kv_cache_bytes is not None:
        low, high = kv_cache_bytes - rounding_bytes, kv_cache_bytes + rounding_bytes
    if kv_cache_tokens is not None:
        first, last = layout.block_range_for_tokens(kv_cache_tokens)
        t_low = first * layout.bytes_per_block
        t_high = (last + 1) * layout.bytes_per_block - 1
        if kv_cache_bytes is None:
            low, high = t_low, t_high
        elif t_low <= high and t_high >= low:  # disagreeing numbers: trust the GiB line
            low, high = max(low, t_low), min(high, t_high)
    measured = int((low + high) // 2)
    uncalibrated = predict(replace(inputs, calibration_bytes=0, calibrated_budget=None), util)
    return replace(
        inputs,
        calibration_bytes=uncalibrated.kv_cache_bytes - uncalibrated.kv_shortfall_bytes - measured,
        calibrated_budget=util,
    )


def largest_util_for_headroom(inputs: HeadroomInputs, headroom_bytes: int) -> float:
    """The largest util, as a person types it (2 decimals), that leaves this much to the
    desktop; 0.0 when no budget does."""
    return largest_util_leaving(inputs.total_bytes, headroom_bytes, _terms(inputs).outside)


def util_for_kv_tokens(inputs: HeadroomInputs, tokens: int) -> float | None:
    """The smallest util (2 decimals) whose pool holds `tokens`; None if even 1.0 does not."""
    utils = [step / 100 for step in range(1, 101)]
    if predict(inputs, 1.0).kv_cache_tokens < tokens:
        return None
    low, high = 0, len(utils) - 1  # tokens grow with the budget: bisect
    while low < high:
        mid = (low + high) // 2
        if predict(inputs, utils[mid]).kv_cache_tokens >= tokens:
            high = mid
        else:
            low = mid + 1
    return utils[low]
