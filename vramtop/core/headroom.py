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
from dataclasses import dataclass, replace

# The budget's own rules live in `vramtop.core.budget`; re-exported for the calculator's users.
from vramtop.core.budget import GIB as GIB
from vramtop.core.budget import LOG_ROUNDING_BYTES as LOG_ROUNDING_BYTES
from vramtop.core.budget import MIB as MIB
from vramtop.core.budget import OUTSIDE_BUDGET_ESTIMATE_BYTES as OUTSIDE_BUDGET_ESTIMATE_BYTES
from vramtop.core.budget import budget_bytes as budget_bytes
from vramtop.core.budget import desktop_headroom_bytes as desktop_headroom_bytes
from vramtop.core.budget import largest_util_leaving
from vramtop.core.model import StartupFacts

# Estimates used only when nothing better is known; every use is labelled "estimated".
NON_TORCH_TP1_BYTES = round(0.25 * GIB)  # measured on H100, one GPU
NON_TORCH_TP_BYTES = round(2.1 * GIB)  # per GPU with tensor parallel 2-4 (NCCL buffers)
CUDAGRAPH_ESTIMATE_BYTES = round(0.75 * GIB)  # graph pools seen at 0.3-1 GiB on 8-32B models
DEFAULT_VOCAB = 128_256
# vLLM subtracts its CUDA-graph memory estimate from the pool from this release on.
CUDAGRAPH_SUBTRACTED_SINCE = (0, 21)

_KV_DTYPE_BYTES = {
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "int8": 1,
}


class HeadroomError(ValueError):
    """Inputs the calculator cannot use; the message says which and why."""


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a model or KV dtype name (`auto` is not resolved here)."""
    try:
        return _KV_DTYPE_BYTES[dtype.lower().removeprefix("torch.")]
    except KeyError:
        known = ", ".join(sorted(_KV_DTYPE_BYTES))
        raise HeadroomError(f"unknown dtype {dtype!r} (known: {known}, auto)") from None


def model_dtype_bytes(dtype: str) -> int:
    # vLLM's "auto" serves float32 checkpoints in 16 bits.
    size = dtype_bytes(dtype)
    return 2 if size == 4 else size


@dataclass(frozen=True)
class Architecture:
    """What a model's layers keep per token and per request (from config.json or numbers)."""

    full_attention_layers: int
    kv_heads: int
    head_dim: int  # MLA: the latent width, kv_lora_rank + qk_rope_head_dim
    sliding_attention_layers: int = 0
    sliding_window: int | None = None
    mla: bool = False  # one latent "head" per token, no separate V, not split by TP
    recurrent_layers: int = 0  # Gated DeltaNet / Mamba / linear attention layers
    recurrent_conv_elements: int = 0  # per layer, whole model (split by TP)
    recurrent_ssm_elements: int = 0  # per layer, whole model (split by TP)
    recurrent_ssm_dtype: str | None = None  # None: the model dtype
    dtype: str = "bfloat16"
    vocab_size: int | None = None
    name: str | None = None  # the config's model_type, for display

    @property
    def kind(self) -> str:
        if self.recurrent_layers:
            return "hybrid"
        if self.mla:
            return "mla"
        if self.sliding_attention_layers:
            return "sliding"
        return "gqa"

    @property
    def attention_layers(self) -> int:
        return self.full_attention_layers + self.sliding_attention_layers


@dataclass(frozen=True)
class HeadroomInputs:
    """Everything a prediction needs. Byte terms are per GPU; None means "estimate it"."""

    total_bytes: int
    architecture: Architecture
    weights_bytes: int
    non_torch_bytes: int | None = None
    activation_bytes: int | None = None
    cudagraph_bytes: int | None = None
    outside_budget_bytes: int | None = None
    kv_cache_dtype: str = "auto"
    served_dtype: str | None = None  # an explicit --dtype; None or "auto": the checkpoint's
    block_size: int = 16
    max_model_len: int = 8192
    max_num_batched_tokens: int = 8192
    tensor_parallel_size: int = 1
    enforce_eager: bool = False
    vllm_version: str | None = None
    weights_estimated: bool = False  # e.g. from safetensors sizes rather than a log
    # Difference between the pool the log's (rounded) terms imply and the pool vLLM really
    # got at the calibration point; 0 when not calibrated. See `calibrate`.
    calibration_bytes: int = 0
    calibrated_util: float | None = None


@dataclass(frozen=True)
class Prediction:
    util: float
    budget_bytes: int
    kv_cache_bytes: int  # negative: the model does not fit in this budget
    num_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    desktop_headroom_bytes: int  # negative: the budget plus the context exceed the card
    estimated: tuple[str, ...]
    block_size: int  # the attention block size vLLM will use (hybrids raise it)
    weights_bytes: int
    non_torch_bytes: int
    activation_bytes: int
    cudagraph_bytes: int
    outside_budget_bytes: int
    recurrent_state_bytes_per_request: int
    calibrated: bool

    @property
    def fits(self) -> bool:
        """vLLM starts only if one request of max-model-len fits in the pool."""
        return self.kv_cache_bytes > 0 and self.max_concurrency >= 1.0


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


def kv_element_bytes(kv_cache_dtype: str, model_dtype: str, served_dtype: str | None) -> int:
    """Bytes per cached element: the KV dtype when set; with `auto`, the dtype vLLM serves in:
    an explicit `--dtype` as given (float32 keeps 4 bytes), else the checkpoint's (float32
    checkpoints are served in 16 bits)."""
    kv = kv_cache_dtype.lower()
    if kv not in ("auto", ""):
        return dtype_bytes(kv)
    if served_dtype is not None and served_dtype.lower() not in ("auto", ""):
        return dtype_bytes(served_dtype)
    return model_dtype_bytes(model_dtype)


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
        pages_per_request=sum(_pages_per_request(g, inputs, block_size) for g in groups),
        recurrent_page_bytes=recurrent_page,
    )


def _pages_per_request(group: str, inputs: HeadroomInputs, block_size: int) -> int:
    if group == "recurrent":
        return 1
    if group == "sliding" and inputs.architecture.sliding_window:
        # SlidingWindowSpec.max_memory_usage_bytes: window + one scheduled batch, +1 block
        # because the window need not start on a block boundary.
        window = inputs.architecture.sliding_window - 1 + inputs.max_num_batched_tokens
        return _cdiv(min(window, inputs.max_model_len), block_size) + 1
    return _cdiv(inputs.max_model_len, block_size)


def parse_version(version: str | None) -> tuple[int, int] | None:
    """(major, minor) of "0.21.0", "0.19.1rc2", "0.10.1+cu126"; None if unreadable."""
    if not version:
        return None
    parts = version.strip().lstrip("v").split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or "x")
    except (IndexError, ValueError):
        return None


def cudagraph_subtracted(vllm_version: str | None, enforce_eager: bool) -> bool:
    """Whether vLLM takes its CUDA-graph estimate out of the pool (unknown version: recent)."""
    if enforce_eager:
        return False
    parsed = parse_version(vllm_version)
    return parsed is None or parsed >= CUDAGRAPH_SUBTRACTED_SINCE


def estimate_activation_bytes(max_num_batched_tokens: int, vocab_size: int | None) -> int:
    """Peak activation of vLLM's profiling pass: the logits of one full batch in 16 bits."""
    return max_num_batched_tokens * (vocab_size or DEFAULT_VOCAB) * 2


def estimate_non_torch_bytes(tensor_parallel_size: int) -> int:
    return NON_TORCH_TP1_BYTES if tensor_parallel_size <= 1 else NON_TORCH_TP_BYTES


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
    kv = (
        budget
        - inputs.weights_bytes
        - terms.non_torch
        - terms.activation
        - terms.cudagraph
        - inputs.calibration_bytes
    )
    blocks = layout.num_blocks(kv)
    return Prediction(
        util=util,
        budget_bytes=budget,
        kv_cache_bytes=kv,
        num_blocks=blocks,
        kv_cache_tokens=layout.tokens(blocks),
        max_concurrency=blocks / layout.pages_per_request,
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
        calibrated=inputs.calibrated_util is not None,
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
    uncalibrated = predict(replace(inputs, calibration_bytes=0, calibrated_util=None), util)
    return replace(
        inputs,
        calibration_bytes=uncalibrated.kv_cache_bytes - measured,
        calibrated_util=util,
    )


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
    if facts.requested_util is None:
        return inputs
    kv = gib(facts.available_kv_gib) if facts.available_kv_gib is not None else None
    return calibrate(inputs, facts.requested_util, kv, facts.kv_cache_tokens)


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
