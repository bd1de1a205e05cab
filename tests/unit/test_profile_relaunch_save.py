"""A relaunch's --save edits the profile file the person keeps: the file it was read from,
only the changed flags and the new history, every comment and every other word as written."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vramtop import config, profile_file
from vramtop.core.vllm import args as vllm_args

WHEN = datetime(2026, 1, 1, tzinfo=UTC)
BUDGET = vllm_args.GPU_MEMORY_UTILIZATION
FILE = """# the box under my desk
name = "desk"
argv = [
  "vllm", "serve", "Qwen/Qwen3-8B",
  # what the desktop leaves it
  "--gpu-memory-utilization=0.93",
  "--api-key", "sk-mine-123",  # my own key, as I wrote it
]
port = 8000  # the usual

[env]
HF_HOME = "/srv/hf"  # the cache disk
"""


def relaunch_saved(path: Path, changes: dict[str, str]) -> str:
    before = profile_file.load_profile_file(path)
    after = before.relaunched(changes, WHEN)
    assert after.loaded_from == path  # a relaunch's copy keeps where it came from
    profile_file.save_relaunch_file(path, before, after)
    return path.read_text()


def test_only_the_changed_flag_and_the_history_change(tmp_path: Path) -> None:
    path = tmp_path / "copy-of-desk.toml"
    path.write_text(FILE)
    text = relaunch_saved(path, {BUDGET: "0.85"})
    assert text.startswith(FILE.replace("=0.93", "=0.85"))
    assert "[[history]]" in text
    back = profile_file.load_profile_file(path)
    assert back.flag("--api-key") == "sk-mine-123"
    assert [(c.flag, c.old, c.new) for c in back.history] == [(BUDGET, "0.93", "0.85")]


def test_a_flag_added_after_a_comment_is_a_word_not_part_of_the_comment(tmp_path: Path) -> None:
    path = tmp_path / "desk.toml"
    path.write_text(FILE)
    text = relaunch_saved(path, {vllm_args.MAX_MODEL_LEN: "32768"})
    assert "# my own key, as I wrote it\n" in text
    argv = tomllib.loads(text)["argv"]
    assert argv[-2:] == ["--max-model-len", "32768"]
    assert argv[:-2] == config.Profile.model_validate(tomllib.loads(FILE)).argv


def test_a_profile_read_from_a_file_equals_the_same_profile_made_in_memory(
    tmp_path: Path,
) -> None:
    path = tmp_path / "desk.toml"
    path.write_text(FILE)
    loaded = profile_file.load_profile_file(path)
    made = config.Profile.model_validate(tomllib.loads(FILE))
    assert loaded.loaded_from == path and made.loaded_from is None
    assert loaded == made


def test_a_profile_that_is_a_link_is_read_through_it_but_never_saved_over_it(
    tmp_path: Path,
) -> None:
    # Kept with the person's dotfiles: read through the link; a save would either replace
    # the link with a file of its own (the dotfiles left behind, silently) or write into a
    # file that may be anyone's. Refused, naming the link and what to do.
    target = tmp_path / "dotfiles" / "desk.toml"
    target.parent.mkdir()
    target.write_text(FILE)
    link = tmp_path / "desk.toml"
    link.symlink_to(target)
    before = profile_file.load_profile_file(link)
    after = before.relaunched({BUDGET: "0.85"}, WHEN)
    with pytest.raises(config.ConfigError, match=r"is a symbolic link to .* --remove-destination"):
        profile_file.save_relaunch_file(link, before, after)
    with pytest.raises(config.ConfigError, match="is a symbolic link"):
        profile_file.save_profile_file(link, after)
    assert link.is_symlink() and target.read_text() == FILE


def test_a_profile_that_cannot_be_written_is_said_as_every_writer_says_it(
    tmp_path: Path,
) -> None:
    """`relaunch --save` whose write fails (a full disk; here a file standing where the
    profile's directory should be) says the path and the fix as every writer does
    (`files.problem_words`), not "[Errno 20] … : 'PATH'"."""
    from vramtop.supervisor.relaunching import _save_profile

    path = tmp_path / "desk.toml"
    path.write_text(FILE)
    before = profile_file.load_profile_file(path)
    (tmp_path / "moved").write_text("a file, not a directory\n")
    after = before.relaunched({BUDGET: "0.8"}, WHEN)
    after._loaded_from = tmp_path / "moved" / "desk.toml"  # (where it was read from)
    said = _save_profile(before, after)
    assert said is not None and "Errno" not in said, said
    assert said.startswith(f"{tmp_path / 'moved'} is not a directory"), said
    assert said.endswith("move it away (or set VRAMTOP_HOME to a directory of your own)")
