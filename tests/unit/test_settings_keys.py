"""`[keys]` in config.toml: a remapping that would take a key from another action, name an
action that does not exist or a key the console keeps is refused with the field named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from vramtop.settings import ConfigError, Settings, load_settings, settings_from
from vramtop.tui.keys import DEFAULT_KEYS


def _load(tmp_path: Path, table: str) -> Settings:
    path = tmp_path / "config.toml"
    path.write_text(f"[keys]\n{table}\n")
    return load_settings(path)


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('relaunch = "q"', "'q' would be both relaunch and quit"),
        ('restart = "b"', "'b' would be both restart and relaunch"),
        ('frobnicate = "z"', "unknown action(s) 'frobnicate'"),
        ('relaunch = "ctrl+p"', "ctrl+p is the console's own"),
        ('relaunch = "x"\nrestart = "x"', "would be both"),
        ('relaunch = "not a key"', "is not a key name"),
        ('relaunch = ""', "is not a key name"),
    ],
)
def test_a_conflicting_or_unknown_remapping_is_refused(
    tmp_path: Path, table: str, words: str
) -> None:
    with pytest.raises(ConfigError, match="field 'keys'") as caught:
        _load(tmp_path, table)
    assert words in str(caught.value)


def test_moving_keys_past_each_other_is_taken(tmp_path: Path) -> None:
    loaded = _load(tmp_path, 'relaunch = "r"\nrestart = "b"\nhelp = "question_mark,f1"')
    assert loaded.keys == {"relaunch": "r", "restart": "b", "help": "question_mark,f1"}


@settings(max_examples=examples(300), deadline=None)
@given(
    table=st.dictionaries(
        st.one_of(st.sampled_from(sorted(DEFAULT_KEYS)), st.text(max_size=8)),
        st.one_of(
            st.sampled_from(["q", "b", "r", "x", "ctrl+b", "f5", "ctrl+q", "a,b", ",", "+"]),
            st.text(max_size=10),
            st.integers(),
        ),
        max_size=5,
    )
)
def test_any_keys_table_is_settings_or_a_config_error(table: dict[str, Any]) -> None:
    try:
        loaded = settings_from({"keys": table}, Path("config.toml"))
    except ConfigError:
        return
    keymap = {**DEFAULT_KEYS, **loaded.keys}
    keys = [k.strip() for chosen in keymap.values() for k in chosen.split(",")]
    assert len(keys) == len(set(keys))  # no key serves two actions
