"""Config files are written by one TOML library, tomlkit (which a relaunch's --save needs to
edit a profile in place): what it writes loads back to the same values, laid out as a person
reads a long command line."""

from __future__ import annotations

import ast
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import vramtop
from tests.support.source_trees import tree_of
from vramtop import profile_file
from vramtop.config import Profile, ProfileChange
from vramtop.settings import Settings, settings_from, settings_to_toml

PACKAGE = Path(vramtop.__file__).parent


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree_of(path)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
    return names


def test_one_toml_writer() -> None:
    users = [str(p) for p in PACKAGE.rglob("*.py") if "tomli_w" in _imported(p)]
    assert not users, f"write TOML with tomlkit (settings.to_toml): {users}"


def test_a_profile_loads_back_as_written() -> None:
    profile = Profile(
        name="p",
        argv=["vllm", "serve", "m", "--port", "8000", "--api-key", 'a"b\\c'],
        env={"A": "1", "B": "é\t"},
        history=[
            ProfileChange(at=datetime(2026, 1, 1, tzinfo=UTC), flag="--max-model-len", old="4096")
        ],
    )
    text = profile_file.profile_to_toml(profile)
    assert Profile.model_validate(tomllib.loads(text)) == profile
    assert 'argv = [\n    "vllm",\n    "serve",\n' in text  # a word a line
    assert "\n[[history]]\n" in text  # as a relaunch's --save adds an entry


def test_settings_load_back_as_written(tmp_path: Path) -> None:
    settings = Settings(interval_s=2.0, keys={"relaunch": "ctrl+r"}, default_profile="p")
    text = settings_to_toml(settings)
    assert settings_from(tomllib.loads(text), tmp_path / "config.toml") == settings
