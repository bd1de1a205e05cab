"""Theme files: bundled ones load, a broken one is skipped with a notice, the console falls back."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import ComposeResult

from tests.support.console import make_app
from tests.support.fake_backend import FakeBackend
from vramtop import locations
from vramtop.outcomes import ActionResult
from vramtop.settings import Settings
from vramtop.tui.app import VramtopApp
from vramtop.tui.messages import ActionFinished, ActionProgress, SampleArrived, TickFailed
from vramtop.tui.themes import ThemeFileError, load_themes, theme_from_file, theme_from_mapping


def test_bundled_themes_include_dark_light_and_high_contrast() -> None:
    loaded = load_themes([locations.bundled_themes_dir()])
    names = {theme.name for theme in loaded.themes}
    assert {"vramtop-dark", "vramtop-light", "vramtop-high-contrast"} <= names
    assert loaded.notices == []
    light = next(t for t in loaded.themes if t.name == "vramtop-light")
    assert light.dark is False and "vram-server" in light.variables


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"name": "x"}, "'primary' is required"),
        ({"primary": "not-a-colour"}, "is not a colour"),
        ({"primary": "#fff", "sparkle": 1}, "unknown field"),
        ({"primary": "#fff", "dark": "yes"}, "'dark' must be"),
        (["primary"], "expected a table"),
    ],
)
def test_bad_theme_data_is_refused_with_the_reason(data: object, reason: str) -> None:
    with pytest.raises(ThemeFileError, match=reason):
        theme_from_mapping(data, default_name="x")


def test_yaml_theme_and_name_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "sunset.yaml"
    path.write_text("primary: '#ff8800'\nbackground: '#101010'\n", encoding="utf-8")
    theme = theme_from_file(path)
    assert theme.name == "sunset" and theme.primary == "#ff8800"


def test_a_broken_user_theme_is_skipped_with_a_notice(tmp_path: Path) -> None:
    (tmp_path / "broken.toml").write_text("primary = \n", encoding="utf-8")
    (tmp_path / "mine.toml").write_text('name = "mine"\nprimary = "#00ff00"\n', encoding="utf-8")
    loaded = load_themes([locations.bundled_themes_dir(), tmp_path])
    assert "mine" in {t.name for t in loaded.themes}
    assert len(loaded.notices) == 1 and "broken.toml" in loaded.notices[0]


async def test_console_falls_back_to_the_default_with_a_notice() -> None:
    user_dir = locations.user_themes_dir()
    user_dir.mkdir(parents=True, exist_ok=True)
    (user_dir / "mine.toml").write_text("primary = [1, 2]\n", encoding="utf-8")
    app = make_app(settings=Settings(interval_s=3600, theme="mine"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.theme == "vramtop-dark"
        messages = [n.message for n in app._notifications]
        assert any("mine.toml is broken" in m for m in messages)
        assert any("'mine' was not found" in m for m in messages)


async def test_user_theme_is_used_when_chosen() -> None:
    user_dir = locations.user_themes_dir()
    user_dir.mkdir(parents=True, exist_ok=True)
    (user_dir / "mine.toml").write_text('primary = "#00ff00"\n', encoding="utf-8")
    app = make_app(settings=Settings(interval_s=3600, theme="mine"))
    async with app.run_test(size=(100, 30)):
        assert app.theme == "mine"


async def test_the_theme_is_chosen_before_the_layout_is_composed() -> None:
    """Before its styles are first parsed: chosen once the console ran, every style sheet
    was parsed again for the theme's colours while the first frame waited."""
    themes: list[str] = []

    class Watched(VramtopApp):
        def compose(self) -> ComposeResult:
            themes.append(self.theme)
            yield from super().compose()

    backend = FakeBackend()
    app = Watched(backend, Settings(interval_s=3600, theme="vramtop-light"), clock=backend.clock)
    async with app.run_test(size=(100, 30)):
        assert themes == ["vramtop-light"]
        assert app.has_class("-light-mode")


async def test_a_read_handled_after_the_screens_are_gone_is_let_go() -> None:
    """On a busy machine a frame posted just before the console closed was handled after its
    screens were gone, and the console stopped on an unexpected error as it quit."""
    backend = FakeBackend()
    app = VramtopApp(backend, Settings(interval_s=3600), clock=backend.clock)
    async with app.run_test(size=(100, 30)):
        pass
    assert app.closed
    app.on_sample_arrived(SampleArrived(backend.tick()))
    app.on_tick_failed(TickFailed("the source hung"))
    app.on_action_progress(ActionProgress("restart", "stopping"))
    app.on_action_finished(ActionFinished("restart", ActionResult(ok=True, message="ready")))
