"""Theme files (TOML or YAML) → `textual.theme.Theme`, with a clear fallback when one is broken.

A theme file holds the fields of `textual.theme.Theme` (name, primary, background, dark, …) and a
`variables` table; vramtop's own variables colour the VRAM bar:
`vram-server`, `vram-desktop`, `vram-free`, `vram-budget`.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

from vramtop import files, locations

if TYPE_CHECKING:
    from textual.app import App

DEFAULT_THEME = "vramtop-dark"
SUFFIXES = (".toml", ".yaml", ".yml")
COLOR_FIELDS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
THEME_FIELDS = {f.name for f in fields(Theme)}
# Used when a theme does not set them: the bar stays readable in any theme.
VARIABLE_DEFAULTS = {
    "vram-server": "$primary",
    "vram-desktop": "$warning",
    "vram-free": "$foreground 30%",
    "vram-budget": "$error",
}


# A theme file is a few hundred bytes.
MAX_THEME_BYTES = 64 * 1024
MAX_THEME_FILES = 200
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$")
_VARIABLE = re.compile(r"^[a-z][a-z0-9-]{0,63}$")
_REFERENCE = re.compile(r"^\$[a-z][a-z0-9-]{0,63}( [0-9]{1,3}%)?$")


class ThemeFileError(ValueError):
    pass


@dataclass(frozen=True)
class LoadedThemes:
    themes: list[Theme]
    notices: list[str]  # one sentence per broken file: what is wrong, what was done


def load_themes(directories: list[Path] | None = None) -> LoadedThemes:
    """Every theme in the bundled and the user's directories (a user's file wins by name)."""
    if directories is None:
        directories = [locations.bundled_themes_dir(), locations.user_themes_dir()]
    by_name: dict[str, Theme] = {}
    notices: list[str] = []
    for directory in directories:
        try:
            paths = sorted(p for p in directory.iterdir() if p.suffix.lower() in SUFFIXES)
        except OSError as error:
            if directory.exists():
                notices.append(f"Themes in {directory} cannot be read ({_first_line(error)}).")
            continue
        if len(paths) > MAX_THEME_FILES:
            notices.append(f"{directory} holds more than {MAX_THEME_FILES} themes; read the first.")
            paths = paths[:MAX_THEME_FILES]
        for path in paths:
            try:
                theme = theme_from_file(path)
            except ThemeFileError as error:
                notices.append(f"Theme file {path.name} is broken ({error}); it was skipped.")
                continue
            by_name[theme.name] = theme
    return LoadedThemes(themes=list(by_name.values()), notices=notices)


def theme_from_file(path: Path) -> Theme:
    try:
        raw = _theme_bytes(path)
        if len(raw) > MAX_THEME_BYTES:
            raise ThemeFileError(f"larger than {MAX_THEME_BYTES // 1024} KiB: not a theme")
        text = raw.decode("utf-8")
    except files.UnsafeFile as error:
        raise ThemeFileError(str(error.strerror)) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ThemeFileError(f"cannot read it: {_first_line(error)}") from None
    if path.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError) as error:
            raise ThemeFileError(f"cannot read it: {_first_line(error)}") from None
    else:
        # Imported for a YAML theme only: the bundled ones are TOML, and the console's first
        # frame waits for every module imported before it.
        import yaml

        try:
            data = yaml.safe_load(text)
        except (yaml.YAMLError, RecursionError) as error:
            raise ThemeFileError(f"cannot read it: {_first_line(error)}") from None
    return theme_from_mapping(data, default_name=path.stem)


def _theme_bytes(path: Path) -> bytes:
    """A theme file's bytes, up to one more than a theme may hold (a theme is a few hundred
    bytes; /dev/zero is not one). A user's, like every file of vramtop's, is theirs and
    writable by no one else (`locations.read_own`); a bundled one is part of the installed
    package, as trusted as its code (whoever installed it may own it)."""
    if path.is_relative_to(locations.bundled_themes_dir()):
        with path.open("rb") as f:
            return f.read(MAX_THEME_BYTES + 1)
    return locations.read_own(path, limit=MAX_THEME_BYTES + 1, follow=True)


def theme_from_mapping(data: Any, default_name: str) -> Theme:
    if not isinstance(data, dict):
        raise ThemeFileError("expected a table of theme fields")
    data = {str(key).replace("-", "_"): value for key, value in data.items()}
    unknown = sorted(set(data) - THEME_FIELDS)
    if unknown:
        raise ThemeFileError(f"unknown field(s): {', '.join(unknown)}")
    data.setdefault("name", default_name)
    name = data["name"]
    if not isinstance(name, str) or not _NAME.match(name):
        raise ThemeFileError(
            f"name = {_shown(name)} is not a theme name (letters, digits, '-', '_', '.' or "
            "spaces, up to 64)"
        )
    if data.get("primary") is None:
        raise ThemeFileError("'primary' is required")
    for field_name in COLOR_FIELDS:
        value = data.get(field_name)
        if value is None:
            continue
        if not isinstance(value, str) or not _colour(value):
            raise ThemeFileError(f"{field_name} = {_shown(value)} is not a colour")
    for field_name in ("luminosity_spread", "text_alpha"):
        value = data.get(field_name, 0.5)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ThemeFileError(f"{field_name} = {_shown(value)} must be a number from 0 to 1")
    for field_name in ("dark", "ansi"):
        if not isinstance(data.get(field_name, True), bool):
            raise ThemeFileError(f"'{field_name}' must be true or false")
    data["variables"] = _variables(data.get("variables", {}))
    try:
        theme = Theme(**data)
        theme.to_color_system().generate()  # what the console does with it, tried here
    except (TypeError, ValueError, ArithmeticError, AttributeError, ColorParseError) as error:
        # (a colour that names another, `$a 0%`, is parsed only here: `$a` may not be one)
        raise ThemeFileError(_first_line(error)) from None
    return theme


def _variables(variables: Any) -> dict[str, str]:
    """A theme's `variables` table: CSS variable names to short text values; vramtop's own
    (the VRAM bar's) must be colours, as its style sheet uses them as such."""
    if not isinstance(variables, dict):
        raise ThemeFileError("'variables' must be a table")
    if len(variables) > 200:
        raise ThemeFileError("'variables' has more than 200 entries")
    checked: dict[str, str] = {}
    for key, value in variables.items():
        if not isinstance(key, str) or not _VARIABLE.match(key):
            raise ThemeFileError(f"variable {_shown(key)} is not a CSS variable name")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ThemeFileError(f"variable {key} = {_shown(value)} must be text")
        text = str(value)
        if len(text) > 100 or not text.isprintable():
            raise ThemeFileError(f"variable {key} = {_shown(value)} is not a usable value")
        if key in VARIABLE_DEFAULTS and not _colour(text):
            raise ThemeFileError(f"variable {key} = {_shown(value)} is not a colour")
        checked[key] = text
    return checked


def _colour(text: str) -> bool:
    """A colour as a theme writes one: `#4FA3E0`, `red`, or `$primary 30%` (another variable,
    maybe faded)."""
    if _REFERENCE.match(text):
        return True
    try:
        Color.parse(text)
    except ColorParseError:
        return False
    return True


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def install_themes(app: App[Any], wanted: str) -> tuple[list[str], list[str]]:
    """Register vramtop's themes on `app` and choose `wanted`; returns the themes' names (in
    the order `t` cycles through them) and what to tell the person (a broken theme file, a
    theme not found)."""
    loaded = load_themes()
    for theme in loaded.themes:
        app.register_theme(theme)
    names = sorted(t.name for t in loaded.themes) or [app.theme]
    notices = list(loaded.notices)
    if wanted in names:
        app.theme = wanted
    else:
        if DEFAULT_THEME in app.available_themes:
            app.theme = DEFAULT_THEME
        notices.append(f"Theme {wanted!r} was not found or could not be read; using {app.theme}.")
    return names, notices


def with_vram_variables(variables: dict[str, str]) -> dict[str, str]:
    """`variables` with vramtop's own filled in where a theme lacks them: a readable VRAM bar."""
    fallback = {
        "vram-server": variables.get("primary", "blue"),
        "vram-desktop": variables.get("warning", "yellow"),
        "vram-free": variables.get("foreground-darken-3", variables.get("panel", "grey")),
        "vram-budget": variables.get("error", "red"),
    }
    return {**{k: fallback[k] for k in VARIABLE_DEFAULTS}, **variables}
