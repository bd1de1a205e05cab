"""Read a model's KV-relevant architecture from its Hugging Face `config.json` (as a dict).

Handles plain and grouped-query attention, MLA (DeepSeek, Kimi), sliding-window layers
(Gemma 2/3, Mistral) and hybrids that mix Gated DeltaNet or Mamba layers with a few attention
layers (Qwen3-Next / Qwen3.5 `layer_types` or `full_attention_interval`, Nemotron-H
`hybrid_override_pattern`). Multimodal configs keep the language model in `text_config`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from vramtop.core.bounds import MAX_CONFIG_COUNT, json_shown, whole_number
from vramtop.core.headroom.terms import Architecture, dtype_bytes
from vramtop.core.json_types import JsonObject, JsonValue

_FULL = {"full_attention", "attention", "global_attention", "full"}
_SLIDING = {"sliding_attention", "sliding_window", "local_attention", "chunked_attention"}
_RECURRENT = {"linear_attention", "mamba", "mamba2", "gated_delta_net", "conv", "recurrent"}


class ModelConfigError(ValueError):
    """The dict is not a model config the calculator understands."""


def architecture_from_config(config: Mapping[str, JsonValue]) -> Architecture:
    """The Architecture of a HF config dict; raises ModelConfigError with a plain reason (the
    caller names the file)."""
    if not isinstance(config, Mapping):
        raise ModelConfigError("not a JSON object")
    text = config.get("text_config") or config.get("llm_config") or {}
    if not isinstance(text, Mapping):
        key = "text_config" if config.get("text_config") else "llm_config"
        raise ModelConfigError(f"{key} is {_what(text)}: an object is expected")
    # The language model's own keys win; the outer config fills what it lacks (e.g. dtype).
    merged: JsonObject = {**config, **text}
    layers = _first_int(merged, "num_hidden_layers", "n_layer", "num_layers", "n_layers", least=1)
    if layers is None:
        raise ModelConfigError("no num_hidden_layers: it does not look like a model config")
    heads = _first_int(merged, "num_attention_heads", "n_head", "num_heads", least=1)
    kv_heads = _first_int(merged, "num_key_value_heads", "num_kv_heads", "n_kv_heads", least=1)
    if _switch(merged, "multi_query", False):
        kv_heads = 1
    kv_heads = kv_heads or heads
    head_dim = _first_int(merged, "head_dim", "attention_head_dim", least=1)
    hidden = _first_int(merged, "hidden_size", "n_embd", "d_model", least=1)
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
        raise ModelConfigError("no attention shape (num_key_value_heads, head_dim / hidden_size)")
    conv, ssm, ssm_dtype = _recurrent_state(merged) if recurrent else (0, 0, None)
    if recurrent and not (conv or ssm):
        raise ModelConfigError("linear-attention/Mamba layers without their state shape")
    dtype = _text(merged, "torch_dtype") or _text(merged, "dtype") or "bfloat16"
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
        vocab_size=_first_int(merged, "vocab_size", "padded_vocab_size", least=1),
        name=str(merged.get("model_type")) if merged.get("model_type") else None,
    )


def _first_int(config: Mapping[str, JsonValue], *keys: str, least: int | None = None) -> int | None:
    """The first of `keys` given (not null) as a whole number above 0. ModelConfigError for
    one of the wrong type (text such as "32", true, a list), a fraction, or one past any
    checkpoint's (1e308 layers, a 40-digit head count: lists and sums of that size); with
    `least`, for one below it too. Without it, 0 and below read as not given (a
    `sliding_window` of 0 or -1 is none)."""
    for key in keys:
        value = config.get(key)
        if value is None:
            continue
        number = whole_number(value)
        if number is None:
            raise ModelConfigError(_not_a_count(key, value))
        if number > MAX_CONFIG_COUNT:
            raise ModelConfigError(
                f"{key} = {_shown(number)} is not a plausible value (at most {MAX_CONFIG_COUNT:,})"
            )
        if number >= 1:
            return number
        if least is not None:
            raise ModelConfigError(f"{key} is {number}: a whole number from {least} is expected")
    return None


def _not_a_count(key: str, value: object) -> str:
    """Why `value` is not a count: past any checkpoint's (1e308, a 40-digit integer, an
    infinity), or not a whole number at all (text, true, 32.5, a list)."""
    huge = isinstance(value, int) or (
        isinstance(value, float) and (not math.isfinite(value) or abs(value) > 2**53)
    )
    if huge and not isinstance(value, bool):
        return f"{key} = {_shown(value)} is not a plausible value"
    return f"{key} is {_what(value)}: a whole number is expected"


def _switch(config: Mapping[str, JsonValue], key: str, default: bool) -> bool:
    """A true/false key (`multi_query`); ModelConfigError for one of another type ("false"
    as text would otherwise read as true)."""
    value = config.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ModelConfigError(f"{key} is {_what(value)}: true or false is expected")
    return value


def _text(config: Mapping[str, JsonValue], key: str) -> str | None:
    """A text key (`torch_dtype`): None when not given; ModelConfigError for another type."""
    value = config.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ModelConfigError(f"{key} is {_what(value)}: text is expected")
    return value


def _what(value: object) -> str:
    """A value as config.json has it, and its kind where the kind is what is wrong."""
    shown = json_shown(value)
    if isinstance(value, str):
        return f"{shown} (text)"
    if isinstance(value, bool):
        return f"{shown} (true/false)"
    if isinstance(value, float):
        return f"{shown} (a fraction)"
    if isinstance(value, list):
        return f"{shown} (a list)"
    if isinstance(value, dict):
        return f"{shown} (an object)"
    return shown


def _shown(value: object) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else "a huge number"
    return text if len(text) <= 40 else text[:40] + "…"


def _layer_kinds(config: Mapping[str, JsonValue], layers: int) -> list[str]:
    """One of "full", "sliding", "recurrent" or "none" (no cache, e.g. MLP-only) per layer."""
    types = config.get("layer_types")
    if types is not None and not isinstance(types, list):
        raise ModelConfigError(f"layer_types is {_what(types)}: a list is expected")
    if types:
        return [_kind(str(t)) for t in types[:layers]]
    pattern = _text(config, "hybrid_override_pattern")  # Nemotron-H: M mamba, * attention
    if pattern:
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
    if window and _switch(config, "use_sliding_window", True) and window < _max_len(config):
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
