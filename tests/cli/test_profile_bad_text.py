"""A profile whose text no command line, environment or path can carry (a NUL character, a
variable's name with `=` or none at all) is refused when it is read, exit 2, by every command
that reads it; and `import --name ''` is refused as every other name no profile can have."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_run import run_captured
from vramtop import locations

KEY = "sk-LEAK0a1b2c3d4e5f6a7b8"


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))


def _profile(body: str) -> None:
    folder = locations.profiles_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / "p.toml"
    path.write_text('name = "p"\n' + body + "\n")
    path.chmod(0o600)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ('argv = ["vllm", "serve", "m\\u0000x"]', "field 'argv': word 3 holds a NUL"),
        ('argv = ["vllm", "serve", "m"]\nenv = { A = "x\\u0000y" }', "A holds a NUL"),
        ('argv = ["vllm", "serve", "m"]\nenv = { "A=B" = "1" }', "'A=B' is not one"),
        ('argv = ["vllm", "serve", "m"]\nenv = { "" = "1" }', "'' is not one"),
        ('argv = ["vllm", "serve", "m"]\nenv = { "A\\u0000" = "1" }', "name holds a NUL"),
        ('argv = ["vllm", "serve", "m"]\nprelude = "true\\u0000"', "'prelude': holds a NUL"),
        ('argv = ["vllm", "serve", "m"]\ncwd = "/tmp\\u0000"', "'cwd': holds a NUL"),
        ('argv = ["vllm", "serve", "m"]\nsource = "/s.sh\\u0000"', "'source': holds a NUL"),
        ('argv = ["vllm", "serve", "m"]\nnotify = ["terminal\\u0000"]', "'notify': word 1"),
    ],
)
@pytest.mark.parametrize(
    "command", [["lint", "p", "--total-gib", "32"], ["start", "--profile", "p"]]
)
def test_text_no_system_call_can_carry_is_refused_when_the_profile_is_read(
    body: str, said: str, command: list[str]
) -> None:
    _profile(body)
    code, out = run_captured(command)
    assert code == 2, out
    assert said in out and "embedded null byte" not in out and "unexpected" not in out


def test_a_nul_beside_a_key_does_not_show_the_command_line() -> None:
    _profile(f'argv = ["vllm", "serve", "m\\u0000", "--api-key", "{KEY}"]')
    code, out = run_captured(["lint", "p"])
    assert code == 2 and "word 3 holds a NUL" in out and KEY not in out


def test_import_refuses_an_empty_name(tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text("vllm serve m\n")
    code, out = run_captured(["import", str(script), "--name", ""])
    assert code == 2 and "--name" in out and "Nothing was saved" in out
    assert not locations.profiles_dir().exists() or not any(locations.profiles_dir().iterdir())


@pytest.mark.parametrize("command", [["lint", "--total-gib", "32"], ["import", "--print"]])
def test_a_launch_script_with_a_nul_is_refused_naming_its_line(
    tmp_path: Path, command: list[str]
) -> None:
    script = tmp_path / "serve.sh"
    script.write_bytes(b"cd /srv\nvllm serve m\x00x --port 8000\n")
    code, out = run_captured([command[0], str(script), *command[1:]])
    assert code == 2 and "line 2: a NUL character" in out
