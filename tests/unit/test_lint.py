"""Lint findings, and the import / lint / profile commands end to end (files in VRAMTOP_HOME)."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vramtop import cli, profile_file, profiles
from vramtop.config import Profile
from vramtop.core.launch.launch_warnings import GIB, lint_launch
from vramtop.settings import load_settings

SCRIPTS = Path(__file__).parent.parent / "fixtures" / "scripts"


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))


def _codes(argv: list[str], **kw: object) -> list[str]:
    return [f.code for f in lint_launch(argv, **kw)]  # type: ignore[arg-type]


def test_exposed_without_key_including_missing_host() -> None:
    assert _codes(["vllm", "serve", "m", "--host", "0.0.0.0"]) == ["exposed"]
    assert _codes(["vllm", "serve", "m"]) == ["exposed"]  # vLLM binds everything by default
    assert _codes(["vllm", "serve", "m", "--host", "::"], api_key_env="K") == []
    assert _codes(["vllm", "serve", "m", "--host", "127.0.0.1"]) == []


@pytest.mark.parametrize("host", ["192.168.1.5", "0", "myhost.lan", "::ffff:0.0.0.0", "10.0.0.1"])
def test_any_host_beyond_loopback_without_a_key_is_exposed(host: str) -> None:
    findings = lint_launch(["vllm", "serve", "m", "--host", host])
    assert [f.code for f in findings] == ["exposed"] and host in findings[0].message
    assert _codes(["vllm", "serve", "m", "--host", host], api_key_env="K") == []


def test_a_unix_socket_is_not_exposed_and_neither_is_any_loopback_form() -> None:
    # With --uds vLLM ignores host and port: nothing listens on the network.
    assert _codes(["vllm", "serve", "m", "--uds", "/run/vllm.sock"]) == []
    assert _codes(["vllm", "serve", "m", "--host", "0.0.0.0", "--uds", "/run/vllm.sock"]) == []
    for host in ("127.1", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"):
        assert _codes(["vllm", "serve", "m", "--host", host]) == [], host


def test_remote_code_and_key_on_command_line() -> None:
    argv = ["vllm", "serve", "m", "--host", "127.0.0.1", "--trust-remote-code", "--api-key", "x"]
    assert _codes(argv) == ["remote-code", "key-on-command-line"]


def test_headroom_below_minimum_suggests_a_budget_that_fits() -> None:
    argv = ["vllm", "serve", "m", "--host", "127.0.0.1", "--gpu-memory-utilization", "0.93"]
    (finding,) = lint_launch(argv, total_bytes=32 * GIB, min_headroom_gib=3.0)
    # 32 − ceil(32 × 0.93) − the 0.5 GiB estimated outside the budget (its CUDA context).
    assert finding.code == "headroom" and "1.74 GiB of 32.00 GiB" in finding.message
    assert "estimated" in finding.message
    assert finding.fix == "use --gpu-memory-utilization 0.89 or lower."
    assert lint_launch([*argv[:-2], "--gpu-memory-utilization", "0.85"], total_bytes=32 * GIB) == []


def test_vllm_port_is_not_where_the_server_listens() -> None:
    argv = ["vllm", "serve", "m", "--host", "127.0.0.1", "--port", "8001"]
    (finding,) = lint_launch(argv, env={"VLLM_PORT": "8001", "PATH": "/bin"})
    assert finding.code == "internal-port"
    assert "VLLM_PORT=8001" in finding.message and "--port (8001)" in finding.message
    # Without --port, vLLM's default is named.
    (finding,) = lint_launch(argv[:-2], env={"VLLM_PORT": "9000"})
    assert "--port (8000)" in finding.message
    assert _codes(argv, env={"VLLM_PORT": ""}) == []
    assert _codes(argv, env={"VLLM_HOST_IP": "10.0.0.1"}) == []


def test_lint_command_sees_vllm_port_in_the_profile_and_the_shell(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["vllm", "serve", "m", "--host", "127.0.0.1", "--port", "8001"]
    argv += ["--gpu-memory-utilization", "0.85"]
    profiles.save_profile(Profile(name="p", argv=argv, env={"VLLM_PORT": "8001"}))
    monkeypatch.delenv("VLLM_PORT", raising=False)
    assert cli.main(["lint", "p", "--total-gib", "32"]) == 1
    assert "warning: internal-port: VLLM_PORT=8001" in capsys.readouterr().out
    profiles.save_profile(Profile(name="q", argv=argv))
    assert cli.main(["lint", "q", "--total-gib", "32"]) == 0
    monkeypatch.setenv("VLLM_PORT", "8001")  # the server inherits the shell's variables
    assert cli.main(["lint", "q", "--total-gib", "32"]) == 1


def test_config_yaml_budget_counts() -> None:
    argv = ["vllm", "serve", "m", "--host", "127.0.0.1", "--config", "c.yaml"]
    codes = _codes(argv, defaults={"gpu_memory_utilization": 0.95}, total_bytes=32 * GIB)
    assert codes == ["headroom"]


def test_import_field_report_saves_private_default_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["import", str(SCRIPTS / "field-report.sh"), "--name", "qwen"]) == 0
    path = profiles.profile_path("qwen")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_settings().default_profile == "qwen"
    p = profiles.load_profile()
    assert p.flag("--gpu-memory-utilization") == "0.85" and p.url == "http://127.0.0.1:8000"
    assert p.prelude and p.prelude.startswith("source /path/to/miniconda3")
    # Refuses to overwrite, --force replaces.
    assert cli.main(["import", str(SCRIPTS / "field-report.sh"), "--name", "qwen"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert cli.main(["import", str(SCRIPTS / "tee.sh"), "--name", "qwen", "--force"]) == 0
    assert profiles.load_profile("qwen").argv == ["vllm", "serve", "m"]


def test_import_key_never_stored(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["import", str(SCRIPTS / "api-server.sh"), "--name", "k"]) == 0
    assert "sk-secret-123" not in profiles.profile_path("k").read_text()
    assert profiles.load_profile("k").api_key_env == "VLLM_API_KEY"
    assert "export VLLM_API_KEY" in capsys.readouterr().err


def test_import_failure_saves_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["import", str(SCRIPTS / "bad-undefined-var.sh")]) == 2
    err = capsys.readouterr().err
    assert "bad-undefined-var.sh: line 3: $PORT is not defined" in err and "Traceback" not in err
    assert profiles.list_profiles() == []


def test_import_print_saves_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["import", str(SCRIPTS / "field-report.sh"), "--print"]) == 0
    assert 'name = "field-report"' in capsys.readouterr().out
    assert profiles.list_profiles() == []


def test_import_reads_config_yaml_port(tmp_path: Path) -> None:
    script = tmp_path / "s.sh"
    script.write_text("vllm serve --config serve.yaml\n")
    (tmp_path / "serve.yaml").write_text("model: m\nport: 8123\n")
    assert cli.main(["import", str(script)]) == 0
    assert profiles.load_profile("s").port == 8123


def test_lint_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["lint", str(SCRIPTS / "field-report.sh"), "--total-gib", "32"]) == 1
    out = capsys.readouterr().out
    assert "exposed" in out and "remote-code" in out
    assert cli.main(["lint", str(SCRIPTS / "bad-loop.sh"), "--total-gib", "32"]) == 2
    assert cli.main(["lint", "nope", "--total-gib", "32"]) == 2
    sim = ["python", "-m", "vramtop.sim.server", "m", "--host", "127.0.0.1"]
    profile = Profile(name="demo", argv=[*sim, "--gpu-memory-utilization", "0.8"], port=8100)
    profiles.save_profile(profile)
    assert cli.main(["lint", "demo", "--total-gib", "32"]) == 0


def test_lint_without_a_target_lints_the_default_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # As `vramtop` with no argument opens the default profile.
    assert cli.main(["lint", "--total-gib", "32"]) == 2
    assert "vramtop import launch.sh" in capsys.readouterr().err  # none yet: how to make one
    assert cli.main(["import", str(SCRIPTS / "field-report.sh"), "--name", "qwen"]) == 0
    capsys.readouterr()
    assert cli.main(["lint", "--total-gib", "32"]) == 1
    out = capsys.readouterr().out
    assert "exposed" in out and "remote-code" in out


def test_broken_profile_is_a_message_not_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    profiles.profile_path("x").write_text('name = "x"\nargv = [1,\nport = \n')
    assert cli.main(["profile", "show", "x"]) == 2
    err = capsys.readouterr().err
    assert "x.toml: not valid TOML" in err and "line" in err


def test_default_profile_none_until_first_import() -> None:
    assert profiles.load_default_profile() is None
    assert cli.main(["import", str(SCRIPTS / "tee.sh")]) == 0
    default = profiles.load_default_profile()
    assert default is not None and default.name == "tee"


def test_unusable_budget_is_a_finding_not_a_traceback() -> None:
    base = ["vllm", "serve", "m", "--host", "127.0.0.1", "--gpu-memory-utilization"]
    assert _codes([*base, "lots"], total_bytes=32 * GIB) == ["budget"]
    assert _codes([*base, "93"]) == ["budget"]  # a percentage, not a fraction
    assert _codes([*base, "0.85"], total_bytes=32 * GIB) == []


def test_a_key_in_another_variable_counts_and_is_saved_as_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "l.sh"
    script.write_text('vllm serve m --host 0.0.0.0 --api-key "$MY_KEY"\n')
    assert cli.main(["import", str(script)]) == 0
    assert "handed to the server as VLLM_API_KEY" in capsys.readouterr().err
    saved = profiles.load_profile("l")
    assert saved.api_key_env == "MY_KEY" and "--api-key" not in saved.argv


def test_an_inline_key_is_not_stored_and_lint_sees_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "inline.sh"
    script.write_text("VLLM_API_KEY=sk-inline111 vllm serve m --host 0.0.0.0 --hf-token hf_x9\n")
    assert cli.main(["import", str(script)]) == 0
    err = capsys.readouterr().err
    assert "export VLLM_API_KEY" in err and "export HF_TOKEN" in err
    text = profiles.profile_path("inline").read_text()
    assert "sk-inline111" not in text and "hf_x9" not in text and "***" not in text
    assert cli.main(["profile", "show", "inline"]) == 0
    assert "sk-inline111" not in capsys.readouterr().out
    assert cli.main(["lint", str(script), "--total-gib", "32"]) == 1
    out = capsys.readouterr().out
    assert "key-on-command-line" in out and "exposed" not in out


def test_a_key_the_script_exports_is_not_told_to_drop_a_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Written out in the script, not on the command line: the fix names what is there.
    for text in (
        "export VLLM_API_KEY=sk-exported111\nvllm serve m\n",
        "VLLM_API_KEY=sk-inline111 vllm serve m\n",
    ):
        script = tmp_path / "exported.sh"
        script.write_text(text)
        assert cli.main(["lint", str(script), "--total-gib", "32"]) == 1
        out = capsys.readouterr().out
        assert "key-on-command-line" in out and "sk-" not in out
        assert "--api-key" not in out and "`ps`" not in out
        assert "remove the key from the script and export VLLM_API_KEY" in out


def test_profile_show_masks_and_a_relaunch_save_keeps_the_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["vllm", "serve", "m", "--api-key", "sk-own-1", "--gpu-memory-utilization", "0.9"]
    profiles.save_profile(Profile(name="own", argv=argv))
    assert cli.main(["profile", "show", "own"]) == 0
    assert "sk-own-1" not in capsys.readouterr().out
    saved = profiles.load_profile("own")
    profile_file.save_profile_file(
        profiles.profile_path("own"),
        saved.relaunched({"--gpu-memory-utilization": "0.65"}, saved_at()),
    )
    assert profiles.load_profile("own").flag("--api-key") == "sk-own-1"
    assert cli.main(["lint", "own", "--total-gib", "32"]) == 1
    assert "key-on-command-line" in capsys.readouterr().out


def saved_at() -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC)


def test_lint_refuses_a_profile_whose_port_contradicts_its_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    profiles.profile_path("p").parent.mkdir(parents=True, exist_ok=True)
    profiles.profile_path("p").write_text(
        'name = "p"\nport = 8000\nargv = ["vllm", "serve", "m", "--port", "18960"]\n'
    )
    assert cli.main(["lint", "p", "--total-gib", "32"]) == 2
    assert "--port 18960" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"prelude": ": ${VLLM_API_KEY:=sk-file-1} && conda activate x"}, "(prelude)"),
        (
            {"prelude": "source ~/.env && read HF_TOKEN <<< hf_file1 && export HF_TOKEN"},
            "(prelude)",
        ),
        ({"prelude": "export OPENAI_API_KEY=sk-file-1"}, "(prelude)"),
        (
            {"env": {"HF_TOKEN": "hf_file1", "AUTH": "Bearer sk-file-1", "A": "1"}},
            "(env HF_TOKEN, env AUTH)",
        ),
        # A key by its form, whatever the name it is given to.
        ({"env": {"OPENAI": "sk-file-1Q7xabcdefghij", "A": "1"}}, "(env OPENAI)"),
        ({"prelude": "printf -v X %s sk-file-1Q7xabcdefghij"}, "(prelude)"),
    ],
)
def test_a_key_written_in_a_profiles_file_is_warned_about(
    fields: dict[str, object], where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["vllm", "serve", "m", "--host", "127.0.0.1"]
    profiles.save_profile(Profile(name="k", argv=argv, **fields))  # type: ignore[arg-type]
    assert cli.main(["lint", "k", "--total-gib", "64"]) == 1
    out = capsys.readouterr().out
    assert f"key-in-profile: the profile's file holds a key in plain text {where}" in out
    assert "sk-file-1" not in out and "hf_file1" not in out


def test_a_prelude_that_refers_to_its_key_by_name_is_not_warned_about(
    capsys: pytest.CaptureFixture[str],
) -> None:
    prelude = 'source ~/.env && huggingface-cli login --token "$HF_TOKEN" && read K < ~/.key'
    argv = ["vllm", "serve", "m", "--host", "127.0.0.1"]
    profiles.save_profile(Profile(name="k", argv=argv, prelude=prelude, env={"HF_TOKEN": ""}))
    assert cli.main(["lint", "k", "--total-gib", "64"]) == 0
    assert "key-in-profile" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        (["--block-size", "3"], "block-size"),
        (["--block_size=0"], "block-size"),
        (["--block-size", "100000"], "block-size"),
        (["--tensor-parallel-size", "1000000"], "tensor-parallel-size"),
        (["-tp", "0"], "tensor-parallel-size"),
        (["--tensor-parallel-size", "two"], "tensor-parallel-size"),
    ],
)
def test_a_count_vllm_would_not_start_with_is_a_finding(extra: list[str], code: str) -> None:
    argv = ["vllm", "serve", "m", "--host", "127.0.0.1", *extra]
    [finding] = lint_launch(argv)
    assert finding.code == code and "vLLM would not start" in finding.message


def test_the_counts_vllm_takes_are_not_findings() -> None:
    for extra in (["--block-size", "16"], ["--block-size", "1"], ["--block-size", "528"],
                  ["-tp", "2"], ["--tensor-parallel-size", "8"]):  # fmt: skip
        assert _codes(["vllm", "serve", "m", "--host", "127.0.0.1", *extra]) == []
