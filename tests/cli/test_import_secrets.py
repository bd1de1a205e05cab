"""No key a person gives vramtop reaches its output: the profile file, `profile show`,
`import --print`, error messages, `doctor`, and the command line `ps` shows of the prelude.

Property tests plant a marker key in every form a shell script (or a profile) can set one,
mixed with other lines, and run the real commands on real files."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.cli_run import run_captured
from tests.support.examples import examples
from tests.support.waiting import wait_until
from vramtop import profiles
from vramtop.supervisor import launch

MARK = "sk-LIVE-321"


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))


def _import(tmp_path: Path, script: str, *extra: str) -> tuple[int, str]:
    path = tmp_path / "launch.sh"
    path.write_text(script)
    return run_captured(["import", str(path), "--name", "p", *extra])


def test_a_key_with_a_default_is_not_stored_shown_or_printed(tmp_path: Path) -> None:
    script = (
        f"export VLLM_API_KEY=${{VLLM_API_KEY:-{MARK}}}\n"
        f"export HF_TOKEN=${{HF_TOKEN:=hf_{MARK}}}\n"
        "source ~/conda.sh && conda activate vllm\n"
        "vllm serve m --host 0.0.0.0\n"
    )
    code, printed = _import(tmp_path, script, "--print")
    assert code == 0 and MARK not in printed
    code, said = _import(tmp_path, script)
    assert code == 0 and MARK not in said
    assert MARK not in profiles.profile_path("p").read_text()
    code, shown = run_captured(["profile", "show", "p"])
    assert code == 0 and MARK not in shown
    p = profiles.load_profile("p")
    assert (p.api_key_env, p.hf_token_env) == ("VLLM_API_KEY", "HF_TOKEN")


def test_a_key_given_as_a_default_to_the_no_op_command_is_not_stored(tmp_path: Path) -> None:
    # Issue 38: this line landed in the prelude as written, key and all, and lint was silent.
    script = f": ${{VLLM_API_KEY:={MARK}}}\nvllm serve m --host 0.0.0.0\n"
    code, said = _import(tmp_path, script)
    assert code == 0 and MARK not in said and "export VLLM_API_KEY" in said
    assert MARK not in profiles.profile_path("p").read_text()
    p = profiles.load_profile("p")
    assert p.prelude is None and p.api_key_env == "VLLM_API_KEY"
    code, said = run_captured(["lint", str(tmp_path / "launch.sh"), "--total-gib", "64"])
    assert code == 1 and "key-on-command-line" in said and MARK not in said


def test_a_validation_error_does_not_print_the_profile(tmp_path: Path) -> None:
    script = f"export VLLM_API_KEY=${{VLLM_API_KEY:-{MARK}}}\nvllm serve m --port eighty\n"
    code, said = _import(tmp_path, script)
    assert code == 2 and MARK not in said and "--port 'eighty' is not a number" in said
    assert "{'name'" not in said


@pytest.mark.parametrize(
    "line", [f"declare -x VLLM_API_KEY={MARK}", f"set -a\nVLLM_API_KEY={MARK}"]
)
def test_a_key_set_by_declare_or_set_a_is_not_dropped(tmp_path: Path, line: str) -> None:
    code, said = _import(tmp_path, f"{line}\nvllm serve m --host 0.0.0.0\n")
    assert code == 0 and MARK not in said
    # The profile still serves with a key: the start is refused until it is exported.
    assert profiles.load_profile("p").api_key_env == "VLLM_API_KEY"
    assert run_captured(["lint", "p", "--total-gib", "32"])[1].count("exposed") == 0


def _profile_file(name: str, text: str) -> None:
    path = profiles.profile_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)


def test_a_key_typed_as_a_number_is_not_echoed() -> None:
    _profile_file(
        "n",
        'name = "n"\nargv = ["vllm", "serve", "m", "--api-key", 987654321987]\n'
        "api_key_env = 987654321988\nprelude = 987654321989\n"
        "[env]\nVLLM_API_KEY = 987654321990\nCUDA_VISIBLE_DEVICES = 7\n",
    )
    code, said = run_captured(["profile", "show", "n"])
    assert code == 2 and "98765432198" not in said
    assert "env.CUDA_VISIBLE_DEVICES" in said and "(got 7)" in said  # others still are


def test_profile_show_masks_a_key_in_the_prelude_and_in_any_variable() -> None:
    _profile_file(
        "w",
        'name = "w"\nargv = ["vllm", "serve", "m"]\n'
        f'prelude = "export VLLM_API_KEY={MARK} && conda activate x"\n'
        f'[env]\nAUTH = "Bearer {MARK}"\nCUDA_VISIBLE_DEVICES = "0"\n',
    )
    code, shown = run_captured(["profile", "show", "w"])
    assert code == 0 and MARK not in shown
    assert "conda activate x" in shown and 'CUDA_VISIBLE_DEVICES = "0"' in shown


@pytest.mark.parametrize("json", [[], ["--json"]])
def test_doctor_masks_the_password_of_its_url(json: list[str]) -> None:
    _, said = run_captured(
        ["doctor", "--no-windows", "--url", "http://admin:S3cretPW@127.0.0.1:9", *json]
    )
    assert "S3cretPW" not in said and "admin:***@127.0.0.1:9" in said


def test_the_prelude_is_not_on_the_command_line() -> None:
    prelude = f"export VLLM_API_KEY={MARK} && conda activate vllm"
    command = launch.build_command(["vllm", "serve", "m"], prelude)
    assert MARK not in " ".join(command) and command[-3:] == ["vllm", "serve", "m"]
    assert launch.prelude_env(prelude) == {launch.PRELUDE_ENV: prelude}


def test_a_running_prelude_shows_no_key_to_ps_and_the_server_gets_it(tmp_path: Path) -> None:
    """The real launch: bash runs the prelude (a `conda activate` takes seconds) with a key
    the person wrote into it; its command line, which every user's `ps` reads, holds none."""
    started, served = tmp_path / "started", tmp_path / "served"
    prelude = f"export VLLM_API_KEY={MARK} && touch {started} && sleep 2"
    server = [
        sys.executable,
        "-c",
        "import os, sys; open(sys.argv[1], 'w').write(os.environ['VLLM_API_KEY'] + ' '"
        f" + str({launch.PRELUDE_ENV!r} in os.environ))",
        str(served),
    ]
    env = {**os.environ, **launch.prelude_env(prelude)}
    child = launch.spawn(launch.build_command(server, prelude), env, None, tmp_path / "log")
    try:
        wait_until(
            lambda: started.exists() or child.poll() is not None,
            deadline_s=60,
            what="the prelude's start",
        )
        seen = Path(f"/proc/{child.pid}/cmdline").read_bytes().decode()
        assert child.poll() is None and "bash" in seen and MARK not in seen
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    # The prelude ran as before, and its text did not follow the server into its environment.
    assert served.read_text() == f"{MARK} False"


# --- properties -----------------------------------------------------------------------------

_NAMES = ["VLLM_API_KEY", "HF_TOKEN", "OPENAI_API_KEY", "MY_SECRET"]
_QUOTES = ["", '"', "'"]


@st.composite
def _key_line(draw: st.DrawFn, mark: str) -> tuple[str, str]:
    """(a line before the vLLM command that sets a key, words for the vLLM command)."""
    name = draw(st.sampled_from(_NAMES))
    q = draw(st.sampled_from(_QUOTES))
    value = f"{q}{mark}{q}"
    before = draw(
        st.sampled_from(
            [
                f"export {name}={value}",
                f"export {name}=${{{name}:-{mark}}}",
                f'export {name}="${{{name}:-{mark}}}"',
                f"export {name}=${{{name}:={mark}}}",
                f"declare -x {name}={value}",
                f"typeset -rx {name}={value}",
                f"set -a\n{name}={value}\nset +a",
                f"set -o allexport\n{name}={value}",
                f"{name}={value}\nexport {name}",
                f'export AUTH="Bearer {mark}"',
                f"export A=1 {name}={value} PATH=$HOME/bin:$PATH",
                f"{name}={value}",
                # The shell's other ways of setting a variable (issue 38).
                f": ${{{name}:={mark}}}",
                f': "${{{name}:={mark}}}"',
                f"true ${{{name}={mark}}}",
                f"echo ${{{name}:={mark}}}",
                f"readonly {name}={value}",
                f"local {name}={value}",
                f"typeset -x {name}={value}",
                f"printf -v {name} {value}",
                f"read {name} <<< {value}",
                f"read -r {name} < <(echo {mark})",
                f"{name}+={value}",
                f'eval "export {name}={mark}"',
                f"source <(echo {name}={mark})",
                f"A=1; {name}={value} && export {name}",
                f"{name}=$'{mark}'; export {name}",
                f"export {name}=$(echo {mark})",
                f"export {name}\n{name}={value}",
                f"declare -a KEYS=({value})",
                f"{name}[0]={value}",
                f"declare -n R={name}\nR={value}",
                "",
            ]
        )
    )
    on_command = draw(
        st.sampled_from(
            [
                f"--api-key {value}",
                f"--api-key={value}",
                f'"--api-key" {value}',
                f"'--api-key={mark}'",
                f"--api_key {value}",
                f"--hf-token {value}",
                f'--api-key "${{VLLM_API_KEY:-{mark}}}"',
                f"--api-key ${name}",
                "",
            ]
        )
    )
    return before, on_command


@st.composite
def _script(draw: st.DrawFn) -> str:
    mark = MARK + draw(st.text(alphabet="abcXYZ0189_-", min_size=0, max_size=6))
    before, on_command = draw(_key_line(mark))
    inline = draw(
        st.sampled_from(
            ["", f"VLLM_API_KEY={mark} ", f"env HF_TOKEN={mark} ", f"HF_TOKEN=${{T:-{mark}}} "]
        )
    )
    filler = draw(
        st.lists(
            st.sampled_from(
                [
                    "source ~/miniconda3/etc/profile.d/conda.sh",
                    "conda activate env_vllm",
                    'export PATH="$CUDA_HOME/bin:$PATH"',
                    "export CUDA_VISIBLE_DEVICES=0",
                    "set -e",
                    "cd /srv",
                    "# a comment",
                    f"huggingface-cli login --token {mark}",
                    "if true; then",
                    "fi",
                    'echo "$(date)"',
                ]
            ),
            max_size=4,
        )
    )
    flags = draw(
        st.lists(
            st.sampled_from(
                [
                    "--host 0.0.0.0",
                    "--port 8000",
                    "--port eighty",
                    "--port $PORT",
                    "--gpu-memory-utilization 0.9",
                    "> log 2>&1",
                    "&",
                    "| tee log",
                    '"$@"',
                    "--trust-remote-code",
                ]
            ),
            max_size=4,
        )
    )
    junk = draw(st.text(alphabet="'\"$`{}()\\;|&<> abc=\n-", max_size=12))
    command = " ".join([f"{inline}vllm serve m", on_command, *flags]).replace("  ", " ")
    lines = [*filler[:2], before, *filler[2:], command, junk]
    return "\n".join(lines) + "\n", mark  # type: ignore[return-value]


@contextlib.contextmanager
def _fresh_home() -> Iterator[Path]:
    """A VRAMTOP_HOME of its own for one example (hypothesis runs many in one test)."""
    with tempfile.TemporaryDirectory() as tmp:
        before = os.environ.get("VRAMTOP_HOME")
        os.environ["VRAMTOP_HOME"] = str(Path(tmp) / "home")
        try:
            yield Path(tmp)
        finally:
            if before is None:
                os.environ.pop("VRAMTOP_HOME", None)
            else:
                os.environ["VRAMTOP_HOME"] = before


@settings(max_examples=examples(150))
@given(_script())
def test_no_key_in_a_launch_script_reaches_any_output(drawn: tuple[str, str]) -> None:
    script, mark = drawn
    with _fresh_home() as tmp:
        path = tmp / "launch.sh"
        path.write_text(script)
        outputs = []
        for argv in (
            ["import", str(path), "--print"],
            ["import", str(path), "--name", "p"],
            ["lint", str(path), "--total-gib", "32"],
        ):
            code, said = run_captured(argv)
            assert code in (0, 1, 2) and "Traceback" not in said and "unexpected" not in said
            outputs.append(said)
        if profiles.profile_path("p").exists():
            outputs.append(profiles.profile_path("p").read_text())
            outputs.append(run_captured(["profile", "show", "p"])[1])
            p = profiles.load_profile("p")
            outputs.append(" ".join(launch.build_command(p.argv, p.prelude)))
        assert not [said for said in outputs if mark in said]


_PROFILE_FIELDS = st.sampled_from(
    [
        'api_key_env = "{m}"',
        "api_key_env = 9{d}",
        'prelude = "export VLLM_API_KEY={m} && conda activate x"',
        "prelude = 9{d}",
        'hf_token_env = ["{m}"]',
        'argv = ["vllm", "serve", "m", "--api-key", "{m}"]',
        'argv = ["vllm", "serve", "m", "--api-key", 9{d}]',
        'argv = ["vllm", "serve", "m", "--api-key={m}", "--port", "eighty"]',
        'argv = ["vllm", "serve", "m", "--hf-token", "{m}", "--host", "0"]',
        'env = {{VLLM_API_KEY = "{m}"}}',
        "env = {{VLLM_API_KEY = 9{d}}}",
        'env = {{AUTH = "Bearer {m}", A = 1}}',
        'env = {{HF_TOKEN = ["{m}"]}}',
        "port = 99999",
        'port = "eighty"',
        'history = [{{at = 2026-01-01T00:00:00Z, flag = "--api-key", old = "{m}", new = 9}}]',
        'history = [{{at = "soon", flag = "--api-key", old = "{m}"}}]',
        'extra_field = "{m}"',
        "stop_timeout_s = -1",
    ]
)


@settings(max_examples=examples(150))
@given(
    st.lists(_PROFILE_FIELDS, min_size=1, max_size=5, unique=True),
    st.text(alphabet="0123456789", min_size=9, max_size=12),
)
def test_no_key_in_a_profile_reaches_any_output(fields: list[str], digits: str) -> None:
    mark = MARK + digits
    keys = {line.split(" =")[0] for line in fields}
    lines = ['name = "p"'] + ([] if "argv" in keys else ['argv = ["vllm", "serve", "m"]'])
    lines += [line.format(m=mark, d=digits) for line in fields]
    # (A field given twice is a TOML error of its own; both kinds are exercised.)
    with _fresh_home():
        _profile_file("p", "\n".join(lines) + "\n")
        for argv in (["profile", "show", "p"], ["lint", "p", "--total-gib", "32"]):
            code, said = run_captured(argv)
            assert code in (0, 1, 2) and "Traceback" not in said and "unexpected" not in said
            assert mark not in said and "9" + digits not in said, (argv, said)
