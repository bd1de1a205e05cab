"""`vramtop import` takes the host and port a launch's `--config` YAML gives, under the
command line's own (which wins)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_run import run_captured
from vramtop import profiles


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))


def _import(tmp_path: Path, serve: str) -> profiles.Profile:
    (tmp_path / "serve.yaml").write_text("host: 127.0.0.5\nport: 8123\nmax-model-len: 4096\n")
    script = tmp_path / "launch.sh"
    script.write_text(f"cd {tmp_path}\n{serve}\n")
    code, said = run_captured(["import", str(script), "--name", "p"])
    assert code == 0, said
    return profiles.load_profile("p")


def test_the_host_and_port_of_a_config_file_are_the_profiles(tmp_path: Path) -> None:
    p = _import(tmp_path, "vllm serve m --config serve.yaml")
    assert (p.host, p.port) == ("127.0.0.5", 8123)


def test_the_command_lines_host_and_port_win_over_the_config_files(tmp_path: Path) -> None:
    p = _import(tmp_path, "vllm serve m --config serve.yaml --host 0.0.0.0 --port 9000")
    assert (p.host, p.port) == ("0.0.0.0", 9000)
