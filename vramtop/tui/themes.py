"""Theme files (TOML or YAML) → `textual.theme.Theme`, with a clear fallback when one is broken.

A theme file holds the fields of `textual.theme.Theme` (name, primary, background, dark, …) and a
`variables` table; vramtop's own variables colour the VRAM bar:
`vram-server`, `vram-desktop`, `vram-free`, `vram-budget`.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

from vramtop import locations

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
        if not directory.is_dir():
            continue
        for path in sorted(directory.iterdir()):
            if path.suffix.lower() not in SUFFIXES:
                continue
            try:
                theme = theme_from_file(path)
            except ThemeFileError as error:
                notices.append(f"Theme file {path.name} is broken ({error}); it was skipped.")
                continue
            by_name[theme.name] = theme
    return LoadedThemes(themes=list(by_name.values()), notices=notices)


def theme_from_file(path: Path) -> Theme:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ThemeFileError(f"cannot read it: {_first_line(error)}") from None
    if path.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ThemeFileError(f"cannot read it: {_first_line(error)}") from None
    else:
        # Imported for a YAML theme only: the bundled ones are TOML, and the console's first
        # frame waits for every module imported before it.
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ThemeFileError(f"cannot read it: {_first_line(error)}") from None
    return theme_from_mapping(data, default_name=path.stem)


def theme_from_mapping(data: Any, default_name: str) -> Theme:
    if not isinstance(data, dict):
        raise ThemeFileError("expected a table of theme fields")
    data = {str(key).replace("-", "_"): value for key, value in data.items()}
    unknown = sorted(set(data) - THEME_FIELDS)
    if unknown:
        raise ThemeFileError(f"unknown field(s): {', '.join(unknown)}")
    data.setdefault("name", default_name)
    if "primary" not in data:
        raise ThemeFileError("'primary' is required")
    for name in COLOR_FIELDS:
        value = data.get(name)
        if value is None:
            continue
        try:
            Color.parse(str(value))
        except ColorParseError:
            raise ThemeFileError(f"{name} = {value!r} is not a colour") from None
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise ThemeFileError("'variables' must be a table")
    data["variables"] = {str(k): str(v) for k, v in variables.items()}
    if not isinstance(data.get("dark", True), bool):
        raise ThemeFileError("'dark' must be true or false")
    try:
        return Theme(**data)
    except (TypeError, ValueError) as error:
        raise ThemeFileError(_first_line(error)) from None


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__
