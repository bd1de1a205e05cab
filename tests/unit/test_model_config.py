"""HF config.json dicts → the architecture the headroom model needs."""

from __future__ import annotations

from typing import Any

import pytest

from vramtop.core.headroom.model_config import ModelConfigError, architecture_from_config

LLAMA_31_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 131072,
}


def test_gqa_from_hidden_size() -> None:
    arch = architecture_from_config(LLAMA_31_8B)
    assert (arch.full_attention_layers, arch.kv_heads, arch.head_dim) == (32, 8, 128)
    assert arch.kind == "gqa" and arch.vocab_size == 128256 and arch.dtype == "bfloat16"


def test_qwen2_with_sliding_window_switched_off_is_full_attention() -> None:
    config = {
        **LLAMA_31_8B,
        "model_type": "qwen2",
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "hidden_size": 3584,
        "sliding_window": 131072,
        "use_sliding_window": False,
    }
    arch = architecture_from_config(config)
    assert (arch.full_attention_layers, arch.kv_heads, arch.head_dim) == (28, 4, 128)
    assert arch.sliding_attention_layers == 0


def test_gemma2_alternates_sliding_and_full_layers() -> None:
    config = {
        "model_type": "gemma2",
        "num_hidden_layers": 42,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 256,
        "hidden_size": 3584,
        "sliding_window": 4096,
        "vocab_size": 256000,
    }
    arch = architecture_from_config(config)
    assert (arch.full_attention_layers, arch.sliding_attention_layers) == (21, 21)
    assert arch.sliding_window == 4096 and arch.head_dim == 256


def test_gemma3_nested_text_config_with_pattern() -> None:
    config = {
        "model_type": "gemma3",
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "gemma3_text",
            "num_hidden_layers": 62,
            "num_attention_heads": 32,
            "num_key_value_heads": 16,
            "head_dim": 128,
            "sliding_window": 1024,
            "sliding_window_pattern": 6,
        },
    }
    arch = architecture_from_config(config)
    assert (arch.full_attention_layers, arch.sliding_attention_layers) == (10, 52)
    assert arch.dtype == "bfloat16"


def test_mistral_window_on_every_layer() -> None:
    config = {**LLAMA_31_8B, "model_type": "mistral", "sliding_window": 4096}
    config["max_position_embeddings"] = 32768
    arch = architecture_from_config(config)
    assert arch.sliding_attention_layers == 32 and arch.full_attention_layers == 0


def test_deepseek_mla_is_one_latent_head() -> None:
    config = {
        "model_type": "deepseek_v3",
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "hidden_size": 7168,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
    }
    arch = architecture_from_config(config)
    assert arch.mla and arch.kind == "mla"
    assert (arch.kv_heads, arch.head_dim, arch.full_attention_layers) == (1, 576, 61)


def test_qwen3_next_hybrid_from_interval() -> None:
    config = {
        "model_type": "qwen3_next",
        "num_hidden_layers": 48,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "hidden_size": 2048,
        "full_attention_interval": 4,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
    }
    arch = architecture_from_config(config)
    assert (arch.full_attention_layers, arch.recurrent_layers) == (12, 36)
    assert arch.recurrent_conv_elements == 3 * 8192
    assert arch.recurrent_ssm_elements == 32 * 128 * 128
    assert arch.kind == "hybrid"


def test_layer_types_list_wins_and_float32_ssm_state_is_kept() -> None:
    config = {
        "model_type": "qwen3_5",
        "text_config": {
            "num_hidden_layers": 4,
            "num_attention_heads": 24,
            "num_key_value_heads": 4,
            "head_dim": 256,
            "layer_types": ["linear_attention"] * 3 + ["full_attention"],
            "linear_num_value_heads": 48,
            "linear_num_key_heads": 16,
            "mamba_ssm_dtype": "float32",
        },
    }
    arch = architecture_from_config(config)
    assert (arch.full_attention_layers, arch.recurrent_layers) == (1, 3)
    assert arch.recurrent_ssm_dtype == "float32"


def test_nemotron_h_pattern() -> None:
    config = {
        "model_type": "nemotron_h",
        "num_hidden_layers": 8,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hybrid_override_pattern": "M-M*-M-M",
        "mamba_num_heads": 128,
        "mamba_head_dim": 64,
        "ssm_state_size": 128,
        "n_groups": 8,
        "conv_kernel": 4,
    }
    arch = architecture_from_config(config)
    assert (arch.full_attention_layers, arch.recurrent_layers) == (1, 4)
    assert arch.recurrent_ssm_elements == 128 * 64 * 128


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ({"name": "not a model"}, "num_hidden_layers"),
        ({"num_hidden_layers": 4}, "attention shape"),
        ({**LLAMA_31_8B, "layer_types": ["weird"] * 32}, "unknown layer type"),
        ({**LLAMA_31_8B, "layer_types": ["mamba"] * 32}, "state shape"),
    ],
)
def test_unusable_configs_say_why(config: dict[str, Any], reason: str) -> None:
    with pytest.raises(ModelConfigError, match=reason):
        architecture_from_config(config)


def test_not_a_dict() -> None:
    with pytest.raises(ModelConfigError):
        architecture_from_config([1, 2])  # type: ignore[arg-type]
