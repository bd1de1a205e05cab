"""Launch scripts → profile parts, and the precise message for every script we cannot take."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtop.core.launch.problems import LaunchScriptError
from vramtop.core.launch.script import parse_launch_script
from vramtop.core.vllm import args as va

SCRIPTS = Path(__file__).parent.parent / "fixtures" / "scripts"


def _parse(name: str):  # type: ignore[no-untyped-def]
    return parse_launch_script((SCRIPTS / name).read_text(), script_dir="/scripts")


def test_field_report_script() -> None:
    r = _parse("field-report.sh")
    assert r.argv[:3] == ["vllm", "serve", "gittensor-model-hub/Qwen3.8-27B-NVFP4-RTX5090"]
    assert len(r.argv) == 37 and r.line == 13
    assert va.gpu_memory_utilization(r.argv) == 0.85
    assert va.max_model_len(r.argv) == 163840
    assert va.host(r.argv) == "0.0.0.0"
    # JSON in single quotes arrives as one argument, byte for byte.
    assert va.get_flag(r.argv, "--override-generation-config") == (
        '{ "temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05, '
        '"repetition_penalty": 1.0 }'
    )
    assert va.get_flag(r.argv, "--default-chat-template-kwargs") == (
        '{"preserve_thinking":false,"reasoning_effort":"medium"}'
    )
    assert r.env == {
        "CUDA_HOME": "/path/to/miniconda3/envs/env_vllm/lib/python3.12/site-packages/nvidia/cu13",
        "VLLM_USE_V2_MODEL_RUNNER": "0",
    }
    assert r.prelude == [
        "source /path/to/miniconda3/etc/profile.d/conda.sh",
        "conda activate env_vllm",
        'export PATH="$CUDA_HOME/bin:$PATH"',
        'export LIBRARY_PATH="/usr/lib/wsl/lib:${LIBRARY_PATH:-}"',
    ]
    assert r.cwd is None and r.warnings == [] and r.api_key_env is None


def test_exec_equals_form_cd_and_assigned_variable() -> None:
    r = _parse("exec-equals.sh")
    assert r.argv == ["vllm", "serve", "./qwen", "--port=8011", "--gpu_memory_utilization=0.8"]
    assert r.cwd == "/srv/models"
    assert va.gpu_memory_utilization(r.argv) == 0.8
    assert [str(w) for w in r.warnings] == [
        "line 4: $@ (the script's own arguments) dropped: a profile runs without any"
    ]


def test_api_server_form_inline_env_and_key_removed() -> None:
    r = _parse("api-server.sh")
    assert r.argv[:3] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert va.find_model(r.argv) == "/models/tiny"
    assert "sk-secret-123" not in " ".join(r.argv) and "--api-key" not in r.argv
    assert r.env == {"CUDA_VISIBLE_DEVICES": "0"}
    assert (r.api_key_env, r.api_key_in_script) == ("VLLM_API_KEY", True)


def test_key_from_environment_variable_is_kept_as_its_name() -> None:
    r = _parse("script-dir.sh")
    assert (r.api_key_env, r.api_key_in_script) == ("MY_KEY", False)
    assert r.cwd == "/scripts" and r.env == {"VLLM_LOGGING_LEVEL": "DEBUG"}
    assert va.port(r.argv) == 8006  # ${PORT:-8006}


def test_config_flag_is_kept_for_the_command_to_read() -> None:
    assert va.config_path(_parse("config-yaml.sh").argv) == "serve.yaml"


def test_windows_line_endings() -> None:
    assert _parse("crlf.sh").argv == ["vllm", "serve", "m", "--port", "8005"]


def test_nohup_redirect_and_background_are_dropped_with_warnings() -> None:
    r = _parse("nohup-background.sh")
    assert r.argv == ["vllm", "serve", "m", "--port", "8004"]
    assert [str(w) for w in r.warnings] == [
        "line 2: `nohup` dropped: vramtop runs the server in its own session, so it survives "
        "a closed terminal",
        "line 2: output redirect `> vllm.log 2>&1` dropped: vramtop writes the server's log "
        "itself (`vramtop logs`)",
        "line 2: `&` dropped: vramtop runs the server in the background itself",
        "line 3: ignored: commands after the vLLM command do not run",
    ]


def test_tee_is_dropped() -> None:
    r = _parse("tee.sh")
    assert r.argv == ["vllm", "serve", "m"]
    assert any("`| tee …` dropped" in str(w) for w in r.warnings)


FORMS = "vramtop recognises `vllm serve MODEL …`"
MALFORMED = {
    "bad-no-vllm.sh": "no vLLM command found; " + FORMS,
    "bad-two-vllm.sh": "line 2: a second vLLM command (the first is on line 1)",
    "bad-unterminated-quote.sh": "line 2: a single quote (') opened here is never closed",
    "bad-double-quote.sh": 'line 1: a double quote (") opened here is never closed',
    "bad-eof-continuation.sh": "line 2: the script ends with a line continuation ('\\')",
    "bad-trailing-space.sh": "line 1: a space after the line-continuation '\\' ends the command",
    "bad-command-substitution.sh": "line 2: command substitution $(nproc) cannot be stored",
    "bad-backticks.sh": "line 1: command substitution `date +%s` cannot be stored",
    "bad-undefined-var.sh": "line 3: $PORT is not defined in the script; write the value or "
    "set PORT=… above the command",
    "bad-pipe-grep.sh": "line 1: the vLLM command's output is piped to `grep`",
    "bad-input-redirect.sh": "line 1: input redirect `< /dev/null` on the vLLM command",
    "bad-heredoc.sh": "line 1: here-documents (<<) are not supported",
    "bad-function.sh": "line 1: shell functions are not supported",
    "bad-loop.sh": "line 3: the vLLM command is inside a `while` loop (line 2)",
    "bad-if.sh": "line 2: the vLLM command is inside an `if` block (line 1)",
    "bad-docker.sh": "line 1: `docker run` is not supported",
    "bad-inline-unknown.sh": "line 1: inline variable CUDA_VISIBLE_DEVICES: $GPU is not "
    "defined in the script",
    "bad-conda-run.sh": "line 1: `conda …` is not a vLLM launch vramtop knows; it "
    "recognises `vllm serve",
    "bad-positional-arg.sh": "line 1: $1 is one of the script's own arguments",
    "bad-cmd-var.sh": "line 2: $SEQS (set on line 1 from a command) is only known when the "
    "script runs",
    "bad-env-var-in-args.sh": "line 2: $MODELS (set on line 1, from the environment) is only "
    "known when the script runs",
}


@pytest.mark.parametrize(("name", "message"), sorted(MALFORMED.items()))
def test_malformed_script_gives_precise_message(name: str, message: str) -> None:
    with pytest.raises(LaunchScriptError) as err:
        _parse(name)
    assert str(err.value).startswith(message), str(err.value)


def test_function_also_names_the_vllm_line() -> None:
    with pytest.raises(LaunchScriptError) as err:
        _parse("bad-function.sh")
    assert [p.line for p in err.value.problems] == [1, 2]


def test_every_fixture_is_covered() -> None:
    names = {p.name for p in SCRIPTS.glob("*.sh")}
    assert {n for n in names if n.startswith("bad-")} == set(MALFORMED)
    assert len(MALFORMED) >= 15


def test_conda_env_named_vllm_is_not_a_vllm_command() -> None:
    r = parse_launch_script("conda activate vllm\nvllm serve m\n")
    assert r.prelude == ["conda activate vllm"] and r.line == 2


def test_quoted_dollar_is_literal() -> None:
    r = parse_launch_script("vllm serve m --served-model-name '$NAME'\n")
    assert r.argv[-1] == "$NAME"


def test_literal_exported_key_is_not_kept() -> None:
    r = parse_launch_script("export VLLM_API_KEY=abc\nvllm serve m\n")
    assert "VLLM_API_KEY" not in r.env and r.api_key_env == "VLLM_API_KEY"
    assert r.api_key_in_script


def test_a_word_then_an_open_paren_is_reported_not_a_crash() -> None:
    # `foo (bar)` reads like a function definition; it once raised AttributeError.
    with pytest.raises(LaunchScriptError) as err:
        parse_launch_script("foo (bar)\nvllm serve m\n")
    assert "shell functions are not supported" in str(err.value)


def test_a_key_in_another_variable_is_named_not_dropped() -> None:
    r = parse_launch_script('vllm serve m --host 0.0.0.0 --api-key "$MY_KEY"\n')
    assert "--api-key" not in r.argv and (r.api_key_env, r.api_key_in_script) == ("MY_KEY", False)


def test_inline_and_exported_secrets_are_not_stored_but_noted() -> None:
    r = parse_launch_script(
        "export HF_TOKEN=hf_exported\nexport OPENAI_API_KEY=sk-other\n"
        "VLLM_API_KEY=sk-inline111 CUDA_VISIBLE_DEVICES=0 vllm serve m\n"
    )
    assert r.env == {"CUDA_VISIBLE_DEVICES": "0"}
    assert (r.api_key_env, r.api_key_in_script) == ("VLLM_API_KEY", True)
    assert r.hf_token_env == "HF_TOKEN"
    notes = " ".join(str(w) for w in r.warnings)
    assert "export VLLM_API_KEY" in notes and "export HF_TOKEN" in notes
    assert "export OPENAI_API_KEY" in notes
    assert "sk-inline111" not in notes and "hf_exported" not in notes


def test_a_written_hf_token_is_dropped_and_a_variable_one_named() -> None:
    r = parse_launch_script("vllm serve m --hf-token hf_abc --port 8001\n")
    assert r.argv == ["vllm", "serve", "m", "--port", "8001"]
    assert r.hf_token_env == "HF_TOKEN" and "export HF_TOKEN" in str(r.warnings)
    r = parse_launch_script("vllm serve m --hf-token=$MY_TOKEN\n")
    assert r.argv == ["vllm", "serve", "m"] and r.hf_token_env == "MY_TOKEN"


def test_a_byte_order_mark_does_not_glue_onto_the_prelude() -> None:
    r = parse_launch_script("\ufeffsource /opt/conda.sh\nconda activate v\nexec vllm serve m\n")
    assert r.prelude == ["source /opt/conda.sh", "conda activate v"]


@pytest.mark.parametrize(
    "line",
    [
        "vllm serve m --port $(" + "$(" * 50_000 + ")" * 50_001,  # command substitution
        "vllm serve m --port $" + "A" * 200_000,  # a variable never set
    ],
)
def test_a_message_quoting_the_script_stays_short(line: str) -> None:
    """A message names the part of the script it is about, cut: one line of 150 KB made a
    message of 150 KB (lint and import print it on one line)."""
    with pytest.raises(LaunchScriptError) as caught:
        parse_launch_script(line + "\n")
    message = str(caught.value)
    assert len(message) < 400, len(message)
    assert "…" in message and "line 1: " in message
