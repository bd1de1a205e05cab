"""Reading and editing vLLM flags in an argv."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vramtop.core.vllm import args as va

FIELD = [
    "vllm", "serve", "gittensor-model-hub/Qwen3.8-27B-NVFP4-RTX5090",
    "--host", "0.0.0.0", "--port", "8000", "--trust-remote-code",
    "--max-model-len", "163840", "--kv-cache-dtype", "fp8",
    "--gpu-memory-utilization", "0.85", "--max-num-seqs", "2",
    "--default-chat-template-kwargs", '{"preserve_thinking":false}',
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        (["vllm", "serve", "m"], "vllm-serve"),
        (["/opt/env/bin/vllm", "serve", "m"], "vllm-serve"),
        (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], "api-server"),
        (["/usr/bin/python3.12", "-u", "-m", "vllm.entrypoints.openai.api_server"], "api-server"),
        (["python3", "-m", "vllm.entrypoints.cli.main", "serve", "m"], "cli-main"),
        (["python", "-m", "vramtop.sim.server", "m"], "sim"),
        # Interpreter options with a value, read as the front door's are (core/module_run).
        (["python", "-X", "utf8", "-m", "vllm.entrypoints.openai.api_server"], "api-server"),
        (["python3", "-W", "ignore", "-u", "-m", "vllm.entrypoints.cli.main", "serve"], "cli-main"),
        (["python3.12", "-mvllm.entrypoints.openai.api_server", "--model", "m"], "api-server"),
    ],
)
def test_launch_forms_are_recognised(argv: list[str], kind: str) -> None:
    form = va.launch_form(argv)
    assert form is not None and form.kind == kind


@pytest.mark.parametrize(
    "argv",
    [
        ["vllm", "bench"],
        ["python", "-m", "http.server"],
        ["python", "serve.py"],
        ["python", "-X", "utf8", "-m", "http.server"],
        ["python3", "-m", "vllm.entrypoints.cli.main", "bench"],
        ["sh", "-c", "python -m vllm.entrypoints.openai.api_server"],
        ["docker"],
        [],
    ],
)
def test_other_commands_are_not_vllm(argv: list[str]) -> None:
    assert va.launch_form(argv) is None


def test_reads_the_four_budget_flags() -> None:
    assert va.gpu_memory_utilization(FIELD) == 0.85
    assert va.max_model_len(FIELD) == 163840
    assert va.kv_cache_dtype(FIELD) == "fp8"
    assert va.max_num_seqs(FIELD) == 2
    assert va.port(FIELD) == 8000 and va.host(FIELD) == "0.0.0.0"


def test_equals_form_and_underscore_spelling_mean_the_same_flag() -> None:
    argv = ["vllm", "serve", "m", "--gpu_memory_utilization=0.7", "--max_model_len", "4096"]
    assert va.get_flag(argv, "--gpu-memory-utilization") == "0.7"
    assert va.get_flag(argv, "max-model-len") == "4096"


def test_last_occurrence_wins() -> None:
    argv = ["vllm", "serve", "m", "--port", "1", "--port=2", "--gpu-memory-utilization", "0.9"]
    assert va.get_flag(argv, "--port") == "2"


def test_set_updates_last_in_its_own_form_and_drops_earlier() -> None:
    argv = ["vllm", "serve", "m", "--port", "1", "--seed", "0", "--port=2", "--x"]
    assert va.set_flag(argv, "--port", "9") == [
        "vllm",
        "serve",
        "m",
        "--seed",
        "0",
        "--port=9",
        "--x",
    ]


def test_set_keeps_everything_else_byte_for_byte() -> None:
    out = va.set_flag(FIELD, "--gpu-memory-utilization", "0.8")
    assert [w for w in out if w != "0.8"] == [w for w in FIELD if w != "0.85"]
    assert out.index("0.8") == FIELD.index("0.85")


def test_set_absent_flag_appends() -> None:
    assert va.set_flag(["vllm", "serve", "m"], "max_num_seqs", "4")[-2:] == ["--max-num-seqs", "4"]


def test_remove_takes_flag_and_value_everywhere() -> None:
    argv = ["vllm", "serve", "m", "--kv-cache-dtype", "fp8", "--port", "1", "--kv_cache_dtype=auto"]
    assert va.remove_flag(argv, "--kv-cache-dtype") == ["vllm", "serve", "m", "--port", "1"]


def test_switch_before_the_model_does_not_swallow_it() -> None:
    argv = ["vllm", "serve", "--trust-remote-code", "my/model", "--port", "1"]
    assert va.find_model(argv) == "my/model"
    assert va.has_flag(argv, "--trust-remote-code")


def test_model_from_flag_positional_or_config() -> None:
    assert va.find_model(FIELD) == "gittensor-model-hub/Qwen3.8-27B-NVFP4-RTX5090"
    api = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--port", "1"]
    assert va.find_model(api) == "/m"
    assert va.find_model(["vllm", "serve", "--config", "c.yaml"], {"model": "y/m"}) == "y/m"


def test_config_values_are_defaults_the_command_line_overrides() -> None:
    defaults = {"gpu_memory_utilization": 0.8, "max-model-len": 8192, "enforce-eager": True}
    argv = ["vllm", "serve", "m", "--config", "c.yaml", "--max-model-len", "4096"]
    assert va.config_path(argv) == "c.yaml"
    assert va.gpu_memory_utilization(argv, defaults) == 0.8
    assert va.max_model_len(argv, defaults) == 4096
    assert va.has_flag(argv, "--enforce-eager", defaults)
    assert not va.has_flag(argv, "--enforce-eager", {"enforce_eager": False})


def test_json_values_and_negative_numbers_are_values() -> None:
    argv = ["vllm", "serve", "m", "--seed", "-1", "--override-generation-config", '{"top_k": 40}']
    assert va.get_flag(argv, "--seed") == "-1"
    assert va.get_flag(argv, "--override-generation-config") == '{"top_k": 40}'


def test_mask_secrets_both_forms() -> None:
    argv = ["vllm", "serve", "m", "--api-key", "sk-1", "--api_key=sk-2", "--port", "1"]
    assert va.mask_secrets(argv) == [
        "vllm", "serve", "m", "--api-key", "***", "--api_key=***", "--port", "1",
    ]  # fmt: skip


@pytest.mark.parametrize(("text", "tokens"), [("163840", 163840), ("160k", 160000), ("2K", 2048)])
def test_token_counts_like_vllm(text: str, tokens: int) -> None:
    assert va.parse_token_count(text) == tokens


_value = st.from_regex(r"[a-z0-9.]{1,6}", fullmatch=True)


@given(st.lists(st.tuples(st.sampled_from(["--port", "--seed", "--max-num-seqs"]), _value)), _value)
def test_set_then_get_roundtrips_and_leaves_other_flags(
    pairs: list[tuple[str, str]], new: str
) -> None:
    argv = ["vllm", "serve", "m"]
    for flag, value in pairs:
        argv += [flag, value]
    out = va.set_flag(argv, "--port", new)
    assert va.get_flag(out, "--port") == new
    assert len(va.flag_uses(out, "--port")) == 1
    for other in ("--seed", "--max-num-seqs"):
        assert va.get_flag(out, other) == va.get_flag(argv, other)
