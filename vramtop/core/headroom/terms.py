"""The calculator's terms as values: a model's layers, the inputs of one prediction, the
prediction itself, dtype sizes, and the estimates used when a log does not say.
"""

from __future__ import annotations

from dataclasses import dataclass

# The unit from the model, not from core/budget.py: the budget's rules read this module's
# `Prediction`, so this module importing the budget would make the two a circle.
from vramtop.core.model import GIB

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
    calibrated_budget: float | None = None
    # Measured: the memory one request needs per token of its length, where the server's own
    # maximum concurrency says it needs other than its printed token count implies (a hybrid
    # model's recurrent layers keep no tokens, and vLLM prints a conservative count). None:
    # the architecture's layout says it.
    request_bytes_per_token: float | None = None


@dataclass(frozen=True)
class Prediction:
    budget: float
    budget_bytes: int
    kv_cache_bytes: int  # the pool: 0 where the budget does not hold the rest (never below)
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
    max_model_len: int = 8192  # the --max-model-len the prediction is for
    request_bytes: int = 0  # the memory one request of max_model_len needs (vLLM's check)
    # What the budget lacks to hold the weights and vLLM's other memory (activation, graphs,
    # non-torch): above 0, there is no pool at all and vLLM would not start.
    kv_shortfall_bytes: int = 0

    @property
    def fits(self) -> bool:
        """vLLM starts only if its pool holds a block and one request of max-model-len (it
        compares memory: `check_enough_kv_cache_memory`)."""
        return (
            self.kv_cache_bytes > 0
            and self.num_blocks >= 1
            and self.request_bytes <= self.kv_cache_bytes
        )


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
