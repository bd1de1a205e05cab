"""A theme file is outside input: one that is broken (a name that is a number, a colour that is
a list, a variable the style sheet cannot use, a huge file) is skipped with a notice, and the
console starts."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.theme import Theme

from tests.support.console import make_app, ticks
from tests.support.examples import examples
from vramtop import locations
from vramtop.tui.themes import ThemeFileError, load_themes, theme_from_file, theme_from_mapping


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"name": 5, "primary": "#fff"}, "not a theme name"),
        ({"name": "", "primary": "#fff"}, "not a theme name"),
        ({"name": "x" * 500, "primary": "#fff"}, "not a theme name"),
        ({"primary": 5}, "not a colour"),
        ({"primary": ["#fff"]}, "not a colour"),
        ({"primary": "#fff", "text_alpha": "high"}, "from 0 to 1"),
        ({"primary": "#fff", "luminosity_spread": float("nan")}, "from 0 to 1"),
        ({"primary": "#fff", "ansi": "no"}, "'ansi' must be"),
        ({"primary": "#fff", "variables": {"vram-server": "bogus"}}, "not a colour"),
        ({"primary": "#fff", "variables": {"vram-free": {"a": [1] * 3}}}, "must be text"),
        ({"primary": "#fff", "variables": {"Bad Name": "#fff"}}, "not a CSS variable"),
        ({"primary": "#fff", "variables": {"x": "a\nb"}}, "not a usable value"),
    ],
)
def test_a_theme_field_of_the_wrong_kind_is_refused_with_the_reason(
    data: dict[str, Any], reason: str
) -> None:
    with pytest.raises(ThemeFileError, match=reason):
        theme_from_mapping(data, default_name="x")


def test_a_huge_or_endless_theme_file_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "huge.toml"
    path.write_bytes(b'primary = "#fff"\n' + b"#" * (50 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(ThemeFileError, match="not a theme"):
            theme_from_file(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20


async def test_the_console_starts_beside_a_theme_named_5() -> None:
    user_dir = locations.user_themes_dir()
    user_dir.mkdir(parents=True, exist_ok=True)
    (user_dir / "five.toml").write_text('name = 5\nprimary = "#00ff00"\n', encoding="utf-8")
    (user_dir / "bar.toml").write_text(
        'primary = "#00ff00"\n[variables]\nvram-server = "not-a-colour"\n', encoding="utf-8"
    )
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        assert app.is_running
        for _ in range(len(app.theme_names)):
            app.action_cycle_theme()
            await pilot.pause()
        assert app.is_running and "five" not in app.theme_names and "bar" not in app.theme_names


values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["#fff", "red", "$primary 30%", "ansi_red"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
fields = st.sampled_from(
    ["name", "primary", "secondary", "background", "dark", "text_alpha", "luminosity_spread",
     "variables", "ansi", "sparkle"]
)  # fmt: skip


@settings(max_examples=examples(300), deadline=None)
@given(
    data=st.dictionaries(fields, values, max_size=6),
    variables=st.dictionaries(
        st.sampled_from(["vram-server", "vram-free", "footer-key-foreground", "x"]), values
    ),
)
def test_any_theme_mapping_is_a_theme_or_a_reason(
    data: dict[str, Any], variables: dict[str, Any]
) -> None:
    data = {**data, "variables": variables} if variables else data
    try:
        theme = theme_from_mapping(data, default_name="fuzzed")
    except ThemeFileError:
        return
    assert isinstance(theme, Theme) and isinstance(theme.name, str)
    assert all(isinstance(v, str) for v in theme.variables.values())


def test_bundled_themes_still_load() -> None:
    loaded = load_themes([locations.bundled_themes_dir()])
    assert loaded.notices == [] and len(loaded.themes) >= 3


def test_a_colour_naming_a_variable_that_is_no_colour_is_a_reason() -> None:
    # Found by the property above: `$a` reads as a reference, and only the colour system
    # finds that it names nothing.
    with pytest.raises(ThemeFileError, match="as a color"):
        theme_from_mapping({"primary": "$a 0%"}, default_name="t")
