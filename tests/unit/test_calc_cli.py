"""`vramtop calc`: the CLI contract, files it reads, and its error messages."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from vramtop.cli import main

FIXTURES = Path(__file__).parents[2] / "tests" / "fixtures"
FIXTURE_LOG = FIXTURES / "vllm-0.32-cpu" / "startup.log"
GPU_LOGS = FIXTURES / "vllm-gpu-written"
LLAMA = ["--layers", "32", "--kv-heads", "8", "--head-dim", "128"]
MEASURED = ["--weights-gib", "14.99", "--non-torch-gib", "0.25", "--activation-gib", "1.89"]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))


def calc(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["calc", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def calc_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    code, out, err = calc(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_json_rows_carry_the_contract_fields(capsys: pytest.CaptureFixture[str]) -> None:
    doc = calc_json(
        capsys, "--total-gib", "79.19", "--util", "0.95", "--util", "0.90", *MEASURED,
        "--cudagraph-gib", "0", *LLAMA, "--max-model-len", "8192", "--outside-budget-gib", "0.5",
    )  # fmt: skip
    assert [r["util"] for r in doc["rows"]] == [0.95, 0.90]
    first = doc["rows"][0]
    for key in (
        "util", "budget_gib", "kv_cache_gib", "kv_cache_tokens", "num_blocks",
        "max_concurrency", "desktop_headroom_gib", "estimated",
    ):  # fmt: skip
        assert key in first
    assert first["kv_cache_gib"] == pytest.approx(58.11, abs=0.01)
    assert first["kv_cache_tokens"] == pytest.approx(476_016, rel=0.001)
    assert first["estimated"] == []
    assert first["desktop_headroom_gib"] == pytest.approx(79.19 - 75.2305 - 0.5, abs=1e-3)


def test_estimates_are_listed_per_row(capsys: pytest.CaptureFixture[str]) -> None:
    doc = calc_json(capsys, "--total-gib", "24", "--util", "0.9", "--weights-gib", "8", *LLAMA)
    assert set(doc["rows"][0]["estimated"]) == {
        "non_torch", "activation", "cudagraph", "outside_budget",
    }  # fmt: skip


def test_table_is_readable(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = calc(
        capsys, "--total-gib", "79.19", "--util", "0.95", *MEASURED, *LLAMA,
        "--vllm-version", "0.19.0", "--for-headroom-gib", "3",
    )  # fmt: skip
    assert code == 0
    assert "KV tokens" in out and "desktop GiB" in out
    assert "largest budget leaving 3.0 GiB" in out
    assert "estimated (not measured): outside_budget" in out


# The word `util` standing alone (not the flags --util and --log-util).
UTIL_WORD = re.compile(r"(?<![-\w])util\b")


def test_the_table_and_its_lines_call_the_budget_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The glossary's word for --gpu-memory-utilization: its column, the inverse questions'
    lines and the calibration's note say "budget"; `util` stays only in the flags' names."""
    log = tmp_path / "old.log"
    log.write_text(OLD_LOG)
    code, out, _ = calc(
        capsys, "--total-gib", "79.19", "--from-log", str(log), *LLAMA, "--log-util", "0.95",
        "--util", "0.95", "--for-headroom-gib", "3", "--for-kv-tokens", "40000",
    )  # fmt: skip
    assert code == 0
    assert out.splitlines()[0].split()[0] == "budget"
    assert "largest budget leaving 3.0 GiB" in out and "smallest budget holding 40,000" in out
    assert "calibrated to the pool the log reports at budget 0.95" in out
    assert not UTIL_WORD.findall(out), out


def test_the_help_says_what_a_budget_gives_the_kv_pool(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """vramtop --help's line for calc names the glossary's KV pool (it said KV cache)."""
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "gives the KV pool and leaves the desktop" in out


def test_inverse_questions(capsys: pytest.CaptureFixture[str]) -> None:
    doc = calc_json(
        capsys, "--total-gib", "31.84", *MEASURED, *LLAMA, "--for-headroom-gib", "3",
        "--for-kv-tokens", "40000", "--outside-budget-gib", "0.6",
    )  # fmt: skip
    headroom_util = doc["for_headroom"]["util"]
    assert headroom_util == round(headroom_util, 2)
    rows = {r["util"]: r for r in doc["rows"]}
    assert rows[headroom_util]["desktop_headroom_gib"] >= 3
    token_util = doc["for_kv_tokens"]["util"]
    assert rows[token_util]["kv_cache_tokens"] >= 40_000


def test_model_config_and_model_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "model"
    model.mkdir()
    config = {
        "model_type": "llama", "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "hidden_size": 4096, "vocab_size": 128256,
    }  # fmt: skip
    (model / "config.json").write_text(json.dumps(config))
    for i, size in enumerate((5 * 2**30, 3 * 2**30)):
        with (model / f"model-{i}.safetensors").open("wb") as f:
            f.truncate(size)  # sparse: sizes only
    doc = calc_json(capsys, "--total-gib", "24", "--util", "0.9", "--model-dir", str(model))
    row = doc["rows"][0]
    assert row["weights_gib"] == 8.0 and "weights" in row["estimated"]
    index = {"metadata": {"total_size": 16 * 2**30}, "weight_map": {}}
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    doc = calc_json(
        capsys, "--total-gib", "24", "--util", "0.9", "--model-dir", str(model),
        "--tensor-parallel-size", "2",
    )  # fmt: skip
    assert doc["rows"][0]["weights_gib"] == 8.0  # 16 GiB split over 2 GPUs


OLD_LOG = """\
INFO 05-01 10:00:00 [__init__.py:1] vLLM API server version 0.19.0
(EngineCore pid=1) INFO 05-01 10:00:30 [gpu_model_runner.py:1] Model loading took 14.99 GiB \
and 30.1 seconds
(EngineCore pid=1) INFO 05-01 10:00:40 [gpu_worker.py:1] Available KV cache memory: 58.11 GiB
(EngineCore pid=1) INFO 05-01 10:00:40 [kv_cache_utils.py:1] GPU KV cache size: 476,016 tokens
(EngineCore pid=1) INFO 05-01 10:00:40 [kv_cache_utils.py:1] Maximum concurrency for 8,192 \
tokens per request: 58.11x
"""

NEW_LOG = """\
INFO 05-01 10:00:00 [__init__.py:1] vLLM API server version 0.29.0
(EngineCore pid=1) INFO 05-01 10:00:30 [gpu_model_runner.py:1] Model loading took 18.85 GiB \
memory and 41.2 seconds
(EngineCore pid=1) INFO 05-01 10:00:40 [gpu_worker.py:1] Free memory on device cuda:0 \
(30.10/31.84 GiB) on startup. Desired GPU memory utilization is (0.93, 29.61 GiB). Actual usage \
is 19.10 GiB for consumed memory (weights + non-torch), 1.20 GiB for peak activation, and 0.05 \
GiB for CUDAGraph memory. Replace gpu_memory_utilization config with X to fit into requested \
memory.
(EngineCore pid=1) INFO 05-01 10:00:40 [gpu_worker.py:1] Available KV cache memory: 9.26 GiB
(EngineCore pid=1) INFO 05-01 10:00:41 [kv_cache_utils.py:1] GPU KV cache size: 75,840 tokens, \
Maximum concurrency for 16,384 tokens per request: 4.63x
"""


def test_from_an_old_log_reproduces_it_and_says_what_was_estimated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "old.log"
    log.write_text(OLD_LOG)
    argv = ["--total-gib", "79.19", "--from-log", str(log), *LLAMA, "--outside-budget-gib", "0"]
    doc = calc_json(capsys, *argv, "--log-util", "0.95", "--util", "0.95", "--util", "0.85")
    at_log = doc["rows"][0]
    assert at_log["kv_cache_tokens"] == 476_016
    assert at_log["max_concurrency"] == 58.11
    assert set(at_log["estimated"]) == {"non_torch", "activation"}
    assert doc["calibrated_util"] == 0.95
    # Without the util the log ran at, it cannot be calibrated, and says so.
    doc = calc_json(capsys, *argv, "--util", "0.95")
    assert doc["calibrated_util"] is None
    assert any("--log-util" in note for note in doc["notes"])


def test_from_a_new_log_everything_is_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The field report's card: 9.26 GiB at 0.93 → about 6.71 GiB at 0.85."""
    log = tmp_path / "new.log"
    log.write_text(NEW_LOG)
    doc = calc_json(
        capsys, "--from-log", str(log), "--layers", "16", "--kv-heads", "4", "--head-dim", "256",
        "--kv-cache-dtype", "fp8", "--util", "0.93", "--util", "0.85",
        "--outside-budget-gib", "0.8",
    )  # fmt: skip
    before, after = doc["rows"]
    assert before["estimated"] == [] and after["estimated"] == []
    assert before["kv_cache_gib"] == pytest.approx(9.26, abs=0.005)
    assert after["kv_cache_gib"] == pytest.approx(6.71, abs=0.01)
    # An explicit flag overrides the log: 1 GiB more weights is 1 GiB less pool.
    heavier = calc_json(
        capsys, "--from-log", str(log), "--layers", "16", "--kv-heads", "4", "--head-dim", "256",
        "--util", "0.93", "--weights-gib", "19.85",
    )  # fmt: skip
    assert heavier["rows"][0]["kv_cache_gib"] == pytest.approx(8.26, abs=0.005)


def test_the_cpu_log_prints_its_pool_and_says_the_budget_does_not_size_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The captured vLLM 0.32 CPU log: "Explicitly set (1.0/12.96) GiB for KV cache", "CPU KV
    # cache size: 1,048,576 tokens"; its /metrics say block size 128 and 8,192 blocks.
    doc = calc_json(capsys, "--from-log", str(FIXTURE_LOG), "--util", "0.5", "--util", "0.9")
    assert doc["device"] == "cpu"
    for row in doc["rows"]:
        assert row["kv_cache_gib"] == 1.0 and row["kv_cache_tokens"] == 1_048_576
        assert row["num_blocks"] == 8192 and row["block_size"] == 128
    assert doc["max_model_len"] == 512
    assert any("VLLM_CPU_KVCACHE_SPACE" in note for note in doc["notes"])
    assert any("block size 128: vLLM's default on CPU" in note for note in doc["notes"])
    # Without --util: the budget the log ran at (its non-default args).
    code, out, _ = calc(capsys, "--from-log", str(FIXTURE_LOG))
    assert code == 0 and "0.85" in out and "does not size the KV pool" in out
    # A model config does not turn it into a GPU calculation.
    doc = calc_json(capsys, "--from-log", str(FIXTURE_LOG), *LLAMA, "--util", "0.5")
    assert doc["device"] == "cpu" and doc["rows"][0]["kv_cache_tokens"] == 1_048_576


@pytest.mark.parametrize("name", ["startup.log", "pool-only.log", "failed-then-served.log"])
def test_a_gpu_log_that_prints_its_pool_is_enough_by_itself(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """9.26 GiB, 120,832 tokens at 0.93 on a 31.84 GiB card: 0.85 gives about 6.71 GiB and
    87,600 tokens, with no model config; a failed run before the good one is not read."""
    log = GPU_LOGS / name
    doc = calc_json(capsys, "--total-gib", "31.84", "--util", "0.93", "--util", "0.85",
                    "--from-log", str(log))  # fmt: skip
    at_log, lower = doc["rows"]
    assert at_log["kv_cache_gib"] == pytest.approx(9.26, abs=0.005)
    assert at_log["kv_cache_tokens"] == 120_832
    assert lower["kv_cache_gib"] == pytest.approx(6.71, abs=0.01)
    assert lower["kv_cache_tokens"] == pytest.approx(87_600, rel=0.002)
    assert doc["calibrated_util"] == 0.93 and doc["max_model_len"] == 163_840
    assert any("block size 16: vLLM's default on GPU" in note for note in doc["notes"])
    # The log's own total is used when --total-gib is not given (where it prints one).
    if name != "pool-only.log":
        alone = calc_json(capsys, "--from-log", str(log), "--util", "0.85")
        assert alone["rows"][0]["kv_cache_tokens"] == lower["kv_cache_tokens"]


def test_a_block_size_in_the_logs_args_is_used_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (GPU_LOGS / "pool-only.log").read_text()
    log = tmp_path / "bs.log"
    log.write_text(
        text.replace("'kv_cache_dtype': 'fp8'", "'kv_cache_dtype': 'fp8', 'block_size': 32")
    )
    doc = calc_json(capsys, "--total-gib", "31.84", "--from-log", str(log), "--util", "0.85")
    assert doc["rows"][0]["block_size"] == 32
    assert any("block size 32 (the log's settings)" in note for note in doc["notes"])


def test_an_error_names_only_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The log gives neither the pool nor the weights: the layers and the weights are missing,
    # and the message does not ask for the --from-log that was given.
    log = tmp_path / "bare.log"
    log.write_text("INFO 05-01 10:00:00 [__init__.py:1] vLLM API server version 0.29.0\n")
    code, _, err = calc(capsys, "--total-gib", "24", "--from-log", str(log), "--util", "0.9")
    assert code == 2 and "--model-config" in err and "KV pool" in err
    code, _, err = calc(capsys, "--total-gib", "24", "--from-log", str(log), "--util", "0.9",
                        *LLAMA)  # fmt: skip
    assert code == 2 and "--weights-gib" in err and "--from-log" not in err
    # The pool without the budget it was measured at: that is what is missing.
    no_util = tmp_path / "no-util.log"
    no_util.write_text(
        (GPU_LOGS / "pool-only.log").read_text().replace("'gpu_memory_utilization': 0.93, ", "")
    )
    code, _, err = calc(capsys, "--total-gib", "31.84", "--from-log", str(no_util), "--util", "0.9")
    assert code == 2 and "--log-util" in err
    doc = calc_json(capsys, "--total-gib", "31.84", "--from-log", str(no_util), "--util", "0.85",
                    "--log-util", "0.93")  # fmt: skip
    assert doc["rows"][0]["kv_cache_gib"] == pytest.approx(6.71, abs=0.01)


def test_the_docs_example_as_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    page = (Path(__file__).parents[2] / "docs" / "commands.md").read_text(encoding="utf-8")
    commands = re.findall(r"`(vramtop calc [^`]*--from-log startup\.log[^`]*)`", page)
    assert commands, "the calc example of docs/commands.md is gone"
    (tmp_path / "startup.log").write_text((GPU_LOGS / "startup.log").read_text())
    monkeypatch.chdir(tmp_path)
    for command in commands:
        code = main(shlex.split(command)[1:])
        out, err = capsys.readouterr()
        assert code == 0, err
        rows = json.loads(out)["rows"]
        assert [r["util"] for r in rows] == [0.93, 0.85]
        assert rows[1]["kv_cache_gib"] == pytest.approx(6.71, abs=0.01)


def test_an_explicit_float32_keeps_a_float32_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--total-gib", "24", "--util", "0.9", *MEASURED, *LLAMA]
    bf16 = calc_json(capsys, *base)["rows"][0]["kv_cache_tokens"]
    f32 = calc_json(capsys, *base, "--dtype", "float32")["rows"][0]["kv_cache_tokens"]
    assert f32 == pytest.approx(bf16 / 2, abs=16)
    # A float32 checkpoint served with --dtype auto runs in 16 bits.
    config = {
        "model_type": "llama", "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "hidden_size": 4096, "torch_dtype": "float32",
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    argv = ["--total-gib", "24", "--util", "0.9", *MEASURED, "--model-config", str(path)]
    assert calc_json(capsys, *argv)["rows"][0]["kv_cache_tokens"] == bf16
    assert calc_json(capsys, *argv, "--dtype", "auto")["rows"][0]["kv_cache_tokens"] == bf16
    assert calc_json(capsys, *argv, "--dtype", "float32")["rows"][0]["kv_cache_tokens"] == f32


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--util", "0", *MEASURED, *LLAMA], "outside (0, 1]"),
        (["--util", "1.2", *MEASURED, *LLAMA], "outside (0, 1]"),
        (["--util", "0.9", "--log-util", "5", *MEASURED, *LLAMA], "--log-util 5 is outside"),
        (["--util", "0.9", "--log-util", "-1", *MEASURED, *LLAMA], "--log-util -1 is outside"),
        (["--util", "0.9", "--weights-gib", "-1", *LLAMA], "cannot be negative"),
        (["--util", "0.9", *MEASURED], "--model-config"),
        (["--util", "0.9", *LLAMA], "weights are unknown"),
        ([*MEASURED, *LLAMA], "at least one --util"),
        (["--util", "0.9", *MEASURED, *LLAMA, "--kv-cache-dtype", "fp4x"], "unknown dtype"),
    ],
)
def test_unusable_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = calc(capsys, "--total-gib", "24", *argv)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_config_that_is_not_a_model_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"name": "my app", "port": 8000}))
    code, _, err = calc(capsys, "--total-gib", "24", "--util", "0.9", *MEASURED,
                        "--model-config", str(bad))  # fmt: skip
    assert code == 2 and "does not look like a model config" in err
    bad.write_text("{not json")
    code, _, err = calc(capsys, "--total-gib", "24", "--util", "0.9", *MEASURED,
                        "--model-config", str(bad))  # fmt: skip
    assert code == 2 and "is not JSON" in err


LLAMA_CONFIG = {"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096}


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("num_hidden_layers", "32", 'num_hidden_layers is "32" (text): a whole number is expected'),
        ("num_hidden_layers", True, "num_hidden_layers is true (true/false): a whole number"),
        ("num_hidden_layers", 0, "num_hidden_layers is 0: a whole number from 1 is expected"),
        ("num_attention_heads", 32.5, "num_attention_heads is 32.5 (a fraction): a whole number"),
        ("num_key_value_heads", -8, "num_key_value_heads is -8: a whole number from 1"),
        ("num_key_value_heads", [8], "num_key_value_heads is [8] (a list): a whole number"),
        ("head_dim", "128", 'head_dim is "128" (text)'),
        ("hidden_size", False, "hidden_size is false (true/false)"),
        ("vocab_size", "128256", 'vocab_size is "128256" (text)'),
        ("vocab_size", 1e300, "vocab_size = 1e+300 is not a plausible value"),
        ("torch_dtype", 16, "torch_dtype is 16: text is expected"),
        ("multi_query", "false", 'multi_query is "false" (text): true or false is expected'),
        ("layer_types", "full_attention", 'layer_types is "full_attention" (text): a list'),
        ("text_config", "llama", 'text_config is "llama" (text): an object is expected'),
        ("sliding_window", "4096", 'sliding_window is "4096" (text)'),
    ],
)
def test_a_config_value_of_the_wrong_kind_is_named_with_what_was_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: object, says: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA_CONFIG, key: value}))
    code, out, err = calc(capsys, "--total-gib", "24", "--util", "0.9", "--weights-gib", "15",
                          "--model-config", str(path))  # fmt: skip
    assert code == 2 and out == ""
    assert f"{path}: {says}" in err and err.count("\n") == 1 and "has no" not in err


def test_a_model_dir_that_is_not_a_checkpoint_folder_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    card = ("--total-gib", "24", "--util", "0.9")
    missing = tmp_path / "nope"
    code, _, err = calc(capsys, *card, "--model-dir", str(missing))
    assert code == 2 and f"--model-dir {missing} does not exist" in err
    a_file = tmp_path / "config.json"
    a_file.write_text(json.dumps(LLAMA_CONFIG))
    code, _, err = calc(capsys, *card, "--model-dir", str(a_file))
    assert code == 2 and f"--model-dir {a_file} is not a folder" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = calc(capsys, *card, "--weights-gib", "15", "--model-dir", str(empty))
    assert code == 2 and f"--model-dir {empty} holds no config.json" in err
    (empty / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    code, _, err = calc(capsys, *card, "--weights-gib", "15", "--model-dir", str(empty))
    assert code == 0, err


@pytest.mark.parametrize("util", ["1e-320", "5e-324", "0.001", "0.3"])
def test_a_budget_too_small_for_the_model_shows_no_negative_pool_and_says_so(
    capsys: pytest.CaptureFixture[str], util: str
) -> None:
    argv = ("--total-gib", "31.84", "--weights-gib", "15", *LLAMA, "--util", util)
    code, out, _ = calc(capsys, *argv)
    assert code == 0
    row = out.splitlines()[1].split()
    assert float(row[0]) == float(util) and row[2] == "0.00" and "-" not in row[2]
    assert f"at {row[0]} the budget" in out and "GiB short of the weights" in out
    assert "no KV pool, vLLM would not start" in out
    data = calc_json(capsys, *argv)
    first = data["rows"][0]
    assert first["kv_cache_gib"] == 0 and first["kv_shortfall_gib"] > 0 and not first["starts"]


@pytest.mark.parametrize("typed", ["1_0", "0x1p-3", "٠.٥", "inf", "nan", "0.5.1", ""])
def test_a_budget_not_written_as_a_plain_number_is_refused(
    capsys: pytest.CaptureFixture[str], typed: str
) -> None:
    with pytest.raises(SystemExit) as exited:  # argparse's usage error
        main(["calc", "--total-gib", "24", *MEASURED, *LLAMA, "--util", typed])
    out, err = capsys.readouterr()
    assert exited.value.code == 2 and out == "" and "--util" in err and "Traceback" not in err


def test_budget_is_an_alias_of_util(capsys: pytest.CaptureFixture[str]) -> None:
    base = ("--total-gib", "79.19", *MEASURED, *LLAMA, "--max-model-len", "8192")
    by_util = calc_json(capsys, *base, "--util", "0.9", "--util", "0.85")
    by_budget = calc_json(capsys, *base, "--budget", "0.9", "--util", "0.85")
    assert by_budget == by_util
    assert [row["util"] for row in by_budget["rows"]] == [0.9, 0.85]


FIELD_MODEL = (
    "--total-gib", "31.84", "--weights-gib", "18.9", "--non-torch-gib", "0.25",
    "--activation-gib", "0.804", "--cudagraph-gib", "0.4", "--layers", "18",
    "--kv-heads", "4", "--head-dim", "256", "--kv-cache-dtype", "fp8",
    "--max-model-len", "262144",
)  # fmt: skip


def test_calc_says_which_budget_vllm_would_refuse_and_the_ceiling_that_fits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = calc(capsys, *FIELD_MODEL, "--util", "0.93", "--util", "0.85", "--json")
    assert code == 0
    at_93, at_85 = json.loads(out)["rows"]
    assert at_93["fits"] and at_93["refusal"] is None and at_93["max_model_len_that_fits"] is None
    assert not at_85["fits"] and at_85["max_model_len_that_fits"] == 163_840
    assert at_85["refusal"].startswith(
        "To serve at least one request with the model's max seq len (262144)"
    )
    code, text, _ = calc(capsys, *FIELD_MODEL, "--util", "0.85")
    assert "vLLM would refuse the start; --max-model-len 163,840 fits" in text
