"""The simulated card and model: sizes and the KV-cache arithmetic vLLM does at startup.

The constants reproduce the field report: an RTX 5090 with 32,607 MiB, a ~18.9 GiB NVFP4 27B
model, a 9.26 GiB KV pool at `--gpu-memory-utilization 0.93`, and about 6.71 GiB at 0.85. The
report's ceilings hold as they did for its author: at 0.93 one request of 262,144 tokens fits
(vLLM starts); at 0.85 it does not (vLLM refuses, naming ~195,000 as the longest that fits),
and 163,840 does. vLLM's startup checks are core's (`core/headroom/startup_checks.py`).
Shared by the world daemon, the fake server and tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 1024**3
MIB = 1024**2

DEVICE_NAME = "NVIDIA GeForce RTX 5090"
TOTAL_MIB = 32_607
VLLM_VERSION = "0.29.0"

# What the model costs. The overhead terms add up to ~1.45 GiB, the "fixed chunk for activation
# and graph memory" the field report infers; they are split the way vLLM's summary line prints.
WEIGHTS_GIB = 18.9
NON_TORCH_GIB = 0.25
# Peak activation of one profiling pass; vLLM's scales with --max-num-batched-tokens.
ACTIVATION_GIB_AT_8192 = 0.804
CUDAGRAPH_GIB = 0.40
# Taken before vLLM's baseline snapshot (CUDA context, cuBLAS workspace), so it lies outside the
# budget: the real footprint is budget + this. Real cards show 0.5–1.3 GB; we keep it small so an
# idle desktop still fits beside a 0.93 budget, as it did on the field-report machine.
CONTEXT_GIB = 0.35
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_BLOCK_SIZE = 16
# The model's native context (the field report lowered it from 262,144 to 163,840).
NATIVE_MAX_MODEL_LEN = 262_144
# Bytes one cached token costs with an fp8 KV cache (twice that for bf16): 18 attention layers
# × 4 KV heads × 256 × K and V. The field report's 9.26 GiB pool then holds 269,696 tokens, so
# one 262,144-token request fits at 0.93 and not at 0.85.
FP8_BYTES_PER_TOKEN = 36_864


def total_bytes(total_mib: int = TOTAL_MIB) -> int:
    return total_mib * MIB


def budget_bytes(util: float, total: int) -> int:
    """vLLM's budget: ceil(total × gpu_memory_utilization)."""
    return math.ceil(total * util)


def kv_dtype_bytes(kv_cache_dtype: str) -> int:
    """Bytes per element of the KV cache: fp8 variants 1, anything else (auto, bf16) 2."""
    return 1 if kv_cache_dtype.lower().startswith("fp8") else 2


@dataclass(frozen=True)
class KvPlan:
    """How vLLM carves its budget, and the KV pool that is left."""

    total: int
    budget: float
    budget_bytes: int
    weights: int
    non_torch: int
    activation: int
    cudagraph: int
    kv_bytes: int
    block_size: int
    bytes_per_block: int
    num_blocks: int
    tokens: int
    max_model_len: int

    @property
    def max_concurrency(self) -> float:
        return self.num_blocks / math.ceil(self.max_model_len / self.block_size)

    def request_bytes(self, tokens: int) -> int:
        """The memory one request of `tokens` holds: its blocks (vLLM's check compares it
        with the pool)."""
        return math.ceil(tokens / self.block_size) * self.bytes_per_block

    @property
    def footprint(self) -> int:
        """What the server really holds on the card: budget plus the CUDA context."""
        return self.budget_bytes + int(CONTEXT_GIB * GIB)


def plan_kv(
    util: float,
    *,
    total: int | None = None,
    kv_cache_dtype: str = "auto",
    max_model_len: int = NATIVE_MAX_MODEL_LEN,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    block_size: int = DEFAULT_BLOCK_SIZE,
    enforce_eager: bool = False,
) -> KvPlan:
    """KV pool = budget − weights − non-torch − peak activation − CUDA-graph estimate."""
    total = total_bytes() if total is None else total
    budget = budget_bytes(util, total)
    weights = int(WEIGHTS_GIB * GIB)
    non_torch = int(NON_TORCH_GIB * GIB)
    activation = int(ACTIVATION_GIB_AT_8192 * GIB * max_num_batched_tokens / 8192)
    cudagraph = 0 if enforce_eager else int(CUDAGRAPH_GIB * GIB)
    kv_bytes = max(0, budget - weights - non_torch - activation - cudagraph)
    per_token = FP8_BYTES_PER_TOKEN * kv_dtype_bytes(kv_cache_dtype)
    bytes_per_block = per_token * block_size
    num_blocks = kv_bytes // bytes_per_block
    return KvPlan(
        total=total,
        budget=util,
        budget_bytes=budget,
        weights=weights,
        non_torch=non_torch,
        activation=activation,
        cudagraph=cudagraph,
        kv_bytes=kv_bytes,
        block_size=block_size,
        bytes_per_block=bytes_per_block,
        num_blocks=num_blocks,
        tokens=num_blocks * block_size,
        max_model_len=max_model_len,
    )


# --- the three machines of the field report's comparison --------------------------------------
@dataclass(frozen=True)
class CardModel:
    """A simulated machine's GPU: its memory model, the demo server's budget, its desktop."""

    key: str  # what `--demo --card` calls it
    device_name: str
    total_mib: int
    # "dedicated": the card's own VRAM; "unified": one pool shared with the CPU, whose numbers
    # are the system's memory (MemTotal, MemAvailable).
    memory_kind: str
    # Where memory squeezed off the card goes: "system" (Windows' shared GPU memory),
    # "gtt" (AMD: evicted into GTT, reported per process), "swap" (unified memory paged out).
    spill: str
    budget: float  # the demo server's --gpu-memory-utilization
    scenario: str  # the bundled scenario its desktop plays on request
    # Decode speed relative to the RTX 5090, by memory bandwidth (~1.8 TB/s; the Spark's
    # LPDDR5x ~0.27 TB/s, the R9700's GDDR6 ~0.64 TB/s).
    decode_scale: float = 1.0
    gtt_total_mib: int = 0  # AMD: the GTT size the driver allows (half the system's memory)
    # The demo server's --max-model-len: the model's native ceiling where one request of it
    # fits at the card's budget (the field report's 0.93), the report's 163,840 where not.
    max_model_len: int = NATIVE_MAX_MODEL_LEN


CARDS: dict[str, CardModel] = {
    "5090": CardModel("5090", DEVICE_NAME, TOTAL_MIB, "dedicated", "system", 0.93, "manual"),
    "spark": CardModel(
        "spark", "NVIDIA GB10", 122_546, "unified", "swap", 0.75, "spark", decode_scale=0.2
    ),
    "r9700": CardModel(
        "r9700",
        "AMD Radeon AI PRO R9700",
        32_624,
        "dedicated",
        "gtt",
        0.90,
        "r9700",
        decode_scale=0.36,
        gtt_total_mib=63_488,
        max_model_len=163_840,
    ),
}
DEFAULT_CARD = "5090"
