"""`vramtop calc`'s inputs are outside input: each count is checked with the flag named, a
model config or a log with absurd numbers is refused in words, and files are read bounded."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from vramtop.cli import main
from vramtop.commands.calc_inputs import read_log
from vramtop.core.headroom.model_config import ModelConfigError, architecture_from_config

GPU_LOG = Path(__file__).parent.parent / "fixtures" / "vllm-gpu-written" / "startup.log"
LLAMA = ["--layers", "32", "--kv-heads", "8", "--head-dim", "128"]
CARD = ["--total-gib", "32", "--util", "0.9", "--weights-gib", "15"]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(["calc", *argv])
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "unexpected error" not in err, err
    return code, err


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--head-dim", "0"),
        ("--layers", "-3"),
        ("--kv-heads", "0"),
        ("--vocab-size", "-1"),
        ("--max-model-len", "0"),
        ("--max-model-len", "-5"),
        ("--block-size", "0"),
        ("--tensor-parallel-size", "0"),
        ("--max-num-batched-tokens", "-1"),
    ],
)
def test_a_count_below_1_names_its_flag(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run([*CARD, *LLAMA, flag, value], capsys)
    assert code == 2 and flag in err and "at least 1" in err
    assert "give --model-config" not in err  # it was given: the value is what is wrong


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--block-size", "3", "1, 8, or a multiple of 16 up to 4,096"),
        ("--block-size", "24", "1, 8, or a multiple of 16"),
        ("--block-size", "8192", "1, 8, or a multiple of 16 up to 4,096"),
        ("--tensor-parallel-size", "1000000", "at most 1,024 GPUs"),
        ("--layers", "999999999999", "at most 16,777,216"),
        ("--kv-heads", "20000000", "at most 16,777,216"),
        ("--head-dim", "20000000", "at most 16,777,216"),
        ("--vocab-size", "999999999999", "at most 16,777,216"),
        ("--max-num-batched-tokens", "999999999999", "at most 67,108,864 tokens"),
    ],
)
def test_a_count_past_what_vllm_or_a_model_takes_names_its_flag(
    flag: str, value: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run([*CARD, *LLAMA, flag, value], capsys)
    assert code == 2 and flag in err and says in err


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--block-size", "1"), ("--block-size", "8"), ("--block-size", "128"),
     ("--block-size", "528"), ("--tensor-parallel-size", "8"), ("--tensor-parallel-size", "3")],
)  # fmt: skip
def test_the_counts_vllm_takes_are_taken(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run([*CARD, *LLAMA, flag, value], capsys)
    assert code == 0, err


@pytest.mark.parametrize(
    "config",
    [
        {"num_hidden_layers": 1e308, "num_attention_heads": 8, "hidden_size": 1024},
        {"num_hidden_layers": 10**40, "num_attention_heads": 8, "hidden_size": 1024},
        {"num_hidden_layers": 32, "num_attention_heads": 8, "hidden_size": 10**40},
        {"num_hidden_layers": 32, "num_attention_heads": 8, "head_dim": float("inf")},
        {"num_hidden_layers": 32, "num_key_value_heads": 8, "head_dim": 128,
         "kv_lora_rank": "big"},
        {"num_hidden_layers": 2**30, "num_attention_heads": 8, "hidden_size": 1024},
    ],
)  # fmt: skip
def test_a_model_config_with_absurd_numbers_is_refused_in_words(
    config: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, err = _run([*CARD, "--model-config", str(path)], capsys)
    assert code in (0, 2) and (code == 0 or "config" in err or "plausible" in err)


def test_a_safetensors_index_whose_metadata_is_a_list_is_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "model.safetensors.index.json").write_text('{"metadata": [1]}')
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 4096)
    argv = ["--total-gib", "32", "--util", "0.9", *LLAMA, "--model-dir", str(tmp_path)]
    code, _ = _run(argv, capsys)
    assert code == 0  # the files' sizes count instead


def test_a_git_lfs_pointer_is_refused_as_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "model.safetensors").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:ab12\nsize 15000000000\n"
    )
    argv = ["--total-gib", "32", "--util", "0.9", *LLAMA, "--model-dir", str(tmp_path)]
    code, err = _run(argv, capsys)
    assert code == 2 and "Git LFS pointer" in err and "git lfs pull" in err


def test_a_log_with_max_model_len_1e400_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = GPU_LOG.read_text().replace("'max_model_len': 163840", "'max_model_len': 1e400")
    text = text.replace("'gpu_memory_utilization': 0.93", "'gpu_memory_utilization': 1e400")
    log = tmp_path / "startup.log"
    log.write_text(text)
    code, err = _run(["--total-gib", "31.84", "--util", "0.9", "--from-log", str(log)], capsys)
    assert code in (0, 2), err


def test_a_huge_log_is_read_in_bounded_memory(tmp_path: Path) -> None:
    # The startup, then hours of requests: 7 MB, with a line of 5 MB (reading the whole file
    # and its lines took about three times the file; every allocation traced is slow).
    log = tmp_path / "long.log"
    request = b'(APIServer pid=1) INFO:     127.0.0.1:5 - "POST /v1/chat/completions" 200 OK\n'
    with log.open("wb") as f:
        f.write(GPU_LOG.read_bytes())
        f.write(b"x" * (5 << 20) + b"\n")
        f.write(request * (2_000_000 // len(request)))
    tracemalloc.start()
    try:
        run = read_log(log)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert run.max_model_len == 163_840 and run.util == 0.93
    assert peak < 12 << 20, peak


def test_dev_zero_as_a_log_ends_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["--total-gib", "32", "--util", "0.9", "--from-log", "/dev/zero"], capsys)
    assert code == 2 and "/dev/zero" in err


numbers = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=3),
)
keys = st.sampled_from(
    ["num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
     "hidden_size", "kv_lora_rank", "qk_rope_head_dim", "vocab_size", "sliding_window",
     "layer_types", "hybrid_override_pattern", "full_attention_interval",
     "linear_num_value_heads", "mamba_num_heads", "ssm_state_size", "model_type",
     "sliding_window_pattern", "max_position_embeddings", "torch_dtype", "text_config"]
)  # fmt: skip


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=st.dictionaries(keys, numbers, max_size=10))
def test_any_model_config_is_an_architecture_or_a_reason(config: dict[str, Any]) -> None:
    tracemalloc.start()
    try:
        try:
            arch = architecture_from_config(config)
        except ModelConfigError:
            return
        finally:
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
    assert 0 <= arch.full_attention_layers <= 2**24 and 1 <= arch.head_dim <= 2**25
