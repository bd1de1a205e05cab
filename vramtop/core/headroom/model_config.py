"""Read a model's KV-relevant architecture from its Hugging Face `config.json` (as a dict).

Handles plain and grouped-query attention, MLA (DeepSeek, Kimi), sliding-window layers
(Gemma 2/3, Mistral) and hybrids that mix Gated DeltaNet or Mamba layers with a few attention
layers (Qwen3-Next / Qwen3.5 `layer_types` or `full_attention_interval`, Nemotron-H
`hybrid_override_pattern`). Multimodal configs keep the language model in `text_config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vramtop.core.bounds import MAX_CONFIG_COUNT, whole_number
from vramtop.core.headroom.terms import Architecture, dtype_bytes
from vramtop.core.json_types import JsonObject, JsonValue

_FULL = {"full_attention", "attention", "global_attention", "full"}
_SLIDING = {"sliding_attention", "sliding_window", "local_attention", "chunked_attention"}
_RECURRENT = {"linear_attention", "mamba", "mamba2", "gated_delta_net", "conv", "recurrent"}


class ModelConfigError(ValueError):
    """The dict is not a model config the calculator understands."""


def architecture_from_config(config: Mapping[str, JsonValue]) -> Architecture:
    """The Architecture of a HF config dict; raises ModelConfigError with a plain reason."""
    if not isinstance(config, Mapping):
        raise ModelConfigError("config.json is not a JSON object")
    text = config.get("text_config") or config.get("llm_config") or {}
    # The language model's own keys win; the outer config fills what it lacks (e.g. dtype).
    merged: JsonObject = {**config, **text} if isinstance(text, Mapping) else dict(config)
    layers = _first_int(merged, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    if layers is None:
        raise ModelConfigError(
            "config.json has no num_hidden_layers: it does not look like a model config"
        )
    heads = _first_int(merged, "num_attention_heads", "n_head", "num_heads")
    kv_heads = _first_int(merged, "num_key_value_heads", "num_kv_heads", "n_kv_heads")
    if merged.get("multi_query"):
        kv_heads = 1
    kv_heads = kv_heads or heads
    head_dim = _first_int(merged, "head_dim", "attention_head_dim")
    hidden = _first_int(merged, "hidden_size", "n_embd", "d_model")
    if head_dim is None and hidden and heads:
        head_dim = hidden // heads
    mla_latent = None
    lora_rank = _first_int(merged, "kv_lora_rank")
    if lora_rank:
        mla_latent = lora_rank + (_first_int(merged, "qk_rope_head_dim") or 64)
    kinds = _layer_kinds(merged, layers)
    full = sum(kind == "full" for kind in kinds)
    sliding = sum(kind == "sliding" for kind in kinds)
    recurrent = sum(kind == "recurrent" for kind in kinds)
    if (full or sliding) and mla_latent is None and (not kv_heads or not head_dim):
        raise ModelConfigError(
            "config.json lacks the attention shape (num_key_value_heads, head_dim / hidden_size)"
        )
    conv, ssm, ssm_dtype = _recurrent_state(merged) if recurrent else (0, 0, None)
    if recurrent and not (conv or ssm):
        raise ModelConfigError(
            "config.json mixes in linear-attention/Mamba layers but not their state shape"
        )
    dtype = str(merged.get("torch_dtype") or merged.get("dtype") or "bfloat16")
    try:
        dtype_bytes(dtype)
    except ValueError:
        dtype = "bfloat16"  # vLLM's "auto" serves unusual checkpoint dtypes in 16 bits
    return Architecture(
        full_attention_layers=full,
        kv_heads=1 if mla_latent else int(kv_heads or 1),
        head_dim=mla_latent or int(head_dim or 1),
        sliding_attention_layers=sliding,
        sliding_window=_first_int(merged, "sliding_window") if sliding else None,
        mla=mla_latent is not None,
        recurrent_layers=recurrent,
        recurrent_conv_elements=conv,
        recurrent_ssm_elements=ssm,
        recurrent_ssm_dtype=ssm_dtype,
        dtype=dtype,
        vocab_size=_first_int(merged, "vocab_size", "padded_vocab_size"),
        name=str(merged.get("model_type")) if merged.get("model_type") else None,
    )


def _first_int(config: Mapping[str, JsonValue], *keys: str) -> int | None:
    """The first of `keys` that holds a whole number above 0; ModelConfigError for one past
    any checkpoint's (1e308 layers, a 40-digit head count), which would otherwise build
    lists and sums of that size."""
    for key in keys:
        value = config.get(key)
        number = whole_number(value)
        # 1e308, a 40-digit integer, 32.5 heads
        implausible = (
            number is None
            and isinstance(value, int | float)
            and not isinstance(value, bool)
            and value > 0
        )
        if implausible:
            raise ModelConfigError(f"{key} = {_shown(value)} is not a plausible value")
        if number is not None and number > 0:
            if number > MAX_CONFIG_COUNT:
                raise ModelConfigError(
                    f"{key} = {_shown(number)} is not a plausible value (at most "
                    f"{MAX_CONFIG_COUNT:,})"
                )
            return number
    return None


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else "a huge number"
    return text if len(text) <= 40 else text[:40] + "…"


def _layer_kinds(config: Mapping[str, JsonValue], layers: int) -> list[str]:
    """One of "full", "sliding", "recurrent" or "none" (no cache, e.g. MLP-only) per layer."""
    types = config.get("layer_types")
    if isinstance(types, list) and types:
        return [_kind(str(t)) for t in types[:layers]]
    pattern = config.get("hybrid_override_pattern")  # Nemotron-H: M mamba, * attention
    if isinstance(pattern, str) and pattern:
        return [{"M": "recurrent", "*": "full"}.get(ch, "none") for ch in pattern[:layers]]
    interval = _first_int(config, "full_attention_interval")
    if interval and "linear_num_value_heads" in config:
        return ["full" if (i + 1) % interval == 0 else "recurrent" for i in range(layers)]
    model_type = str(config.get("model_type", ""))
    window = _first_int(config, "sliding_window")
    if window and model_type == "gemma2":
        return ["sliding" if i % 2 == 0 else "full" for i in range(layers)]
    pattern_len = _first_int(config, "sliding_window_pattern")
    if window and pattern_len and model_type.startswith("gemma3"):
        return ["full" if (i + 1) % pattern_len == 0 else "sliding" for i in range(layers)]
    if window and config.get("use_sliding_window", True) and window < _max_len(config):
        return ["sliding"] * layers  # Mistral-style: one window on every layer
    return ["full"] * layers


def _max_len(config: Mapping[str, JsonValue]) -> int:
    length = whole_number(config.get("max_position_embeddings"))
    return length if length is not None and length > 0 else 2**31


def _kind(layer_type: str) -> str:
    name = layer_type.lower()
    if name in _FULL:
        return "full"
    if name in _SLIDING:
        return "sliding"
    if name in _RECURRENT:
        return "recurrent"
    raise ModelConfigError(f"unknown layer type {layer_type!r} in layer_types")


def _recurrent_state(config: Mapping[str, JsonValue]) -> tuple[int, int, str | None]:
    """(conv elements, ssm elements, ssm dtype) of one recurrent layer, before TP."""
    ssm_dtype = config.get("mamba_ssm_dtype")
    ssm_dtype = str(ssm_dtype) if isinstance(ssm_dtype, str) and ssm_dtype != "auto" else None
    value_heads = _first_int(config, "linear_num_value_heads")
    if value_heads:  # Gated DeltaNet (Qwen3-Next, Qwen3.5)
        key_heads = _first_int(config, "linear_num_key_heads") or value_heads
        key_dim = _first_int(config, "linear_key_head_dim") or 128
        value_dim = _first_int(config, "linear_value_head_dim") or 128
        kernel = _first_int(config, "linear_conv_kernel_dim") or 4
        conv_dim = key_dim * key_heads * 2 + value_dim * value_heads
        return conv_dim * (kernel - 1), value_heads * key_dim * value_dim, ssm_dtype
    heads = _first_int(config, "mamba_num_heads", "mamba_n_heads")
    state = _first_int(config, "ssm_state_size", "mamba_d_state", "state_size")
    if heads and state:  # Mamba2 (Nemotron-H, Granite 4, Falcon-H1)
        head_dim = _first_int(config, "mamba_head_dim", "mamba_d_head") or 64
        groups = _first_int(config, "n_groups", "mamba_n_groups") or 1
        kernel = _first_int(config, "conv_kernel", "mamba_d_conv") or 4
        inner = heads * head_dim
        conv = (inner + 2 * groups * state) * (kernel - 1)
        return conv, heads * head_dim * state, ssm_dtype
    return 0, 0, ssm_dtype
