"""vramtop's settings (config.toml): the model, loading and saving; and what every config file
shares (`ConfigError`, reading TOML, writing a private file).

Validated by hand, beside pydantic (profiles, in config.py, use it), because the console and
`--once` read the settings before their first frame or answer: loading config.toml took
~84 ms of CPU in a fresh interpreter this way and ~184 ms with a pydantic model of the same
fields (`python -m bench.bench_own_code`, "settings"), a tenth of a second more before
anything is drawn (tests/cli/test_start_up_imports.py keeps pydantic out). Every field carries a
docstring: they are the user documentation of the file. A broken file never gives a
traceback: `ConfigError` names the file, the line (TOML syntax) or the field, and what is
wrong, worded as for a profile.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtop import files
from vramtop.core import bounds, secrets
from vramtop.core.shell_words import shell_word

# How the GPU is read (see sources/probes.py).
GPU_PROBES: tuple[str, ...] = ("auto", "nvml", "nvml-unified", "amd", "amd-sysfs")


class ConfigError(Exception):
    """A settings or profile file vramtop cannot use; the message is for the user."""


@dataclass(frozen=True)
class Settings:
    """vramtop's settings (config.toml in the config directory). Every field is optional."""

    interval_s: float = 1.0
    """Seconds between samples of the GPU and the server."""
    default_profile: str | None = None
    """The profile used when none is named (set by the first `vramtop import`)."""
    min_desktop_headroom_gib: float = 3.0
    """The VRAM (GiB) the budget must leave for the desktop; `vramtop lint` warns below it."""
    theme: str = "vramtop-dark"
    """The console's colour theme (bundled, or a file in the themes directory)."""
    keys: dict[str, str] = field(default_factory=dict)
    """Key remapping: action id → key, e.g. {relaunch = "ctrl+r"}."""
    record_sessions: bool = False
    """Record every console session to a file under the log directory (sessions/), for
    `vramtop diagnose` and `vramtop replay`."""
    gpu_probe: str = "auto"
    """How the GPU is read. `auto` picks NVML for NVIDIA (unified memory recognised on a known
    integrated device such as the DGX Spark's GB10), else AMD; `nvml` reads dedicated VRAM only;
    `nvml-unified` takes NVML's "not supported" memory as one pool shared with the system
    (read from /proc/meminfo); `amd` uses amdsmi when it works, else sysfs and DRM fdinfo;
    `amd-sysfs` never tries amdsmi."""
    fleet: dict[str, str] = field(default_factory=dict)
    """The boxes `vramtop fleet` shows when none is named on its command line: a
    `name = "URL"` entry per box (the URL of its `vramtop export`), and
    `prometheus = "URL"` to read them all through that Prometheus server instead (which is
    then used, the entries beside it not read)."""

    def __post_init__(self) -> None:
        problems = _problems(dataclasses.asdict(self))
        if problems:
            raise ValueError("; ".join(f"{name}: {message}" for name, message in problems))

    def replace(self, **changes: Any) -> Settings:
        """A copy with `changes` (checked as the file's fields are)."""
        return dataclasses.replace(self, **changes)


# The shortest interval between samples: a tick costs up to ~20 ms of CPU (bench_tick.py).
MIN_INTERVAL_S = bounds.MIN_INTERVAL_S

# What a true/false field also takes, as the settings always have (case does not matter).
_TRUE_WORDS = frozenset(("1", "on", "t", "true", "y", "yes"))
_FALSE_WORDS = frozenset(("0", "off", "f", "false", "n", "no"))


def as_number(value: object) -> float | None:
    """`value` as the number a number field holds (None: not one). A quoted number ("2") and
    true/false (1/0) have always been taken; NaN and infinities never are."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def as_bool(value: object) -> bool | None:
    """`value` as true/false (None: not one): also 1/0 and the words yes/no, on/off, …"""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS or word in _FALSE_WORDS:
            return word in _TRUE_WORDS
    return None


def interval_problem(seconds: float) -> str | None:
    """What is wrong with `seconds` as the interval between samples (None: nothing): at
    least `MIN_INTERVAL_S`, at most an hour (a longer wait overflows a timer)."""
    return bounds.interval_problem(seconds)


def _text_or_none(value: object) -> bool:
    return value is None or isinstance(value, str)


def _keys(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


# Keys the console keeps for itself (Textual's palette and quit, moving between fields, the
# dialogs' Enter and Escape): an action moved onto one would take it away.
RESERVED_KEYS = frozenset(
    ("ctrl+c", "ctrl+p", "ctrl+q", "tab", "shift+tab", "escape", "enter", "up", "down")
)
_KEY_NAME = re.compile(r"^[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*$")


def keys_problem(keys: dict[str, str]) -> str | None:
    """What is wrong with a `[keys]` table (None: nothing): an action that does not exist, a
    key that is not one, a key kept by the console, or two actions on one key once the
    remapping is laid over the defaults (`relaunch = "q"` took Quit away)."""
    if not keys:
        return None
    from vramtop.core.keymap import DEFAULT_KEYS

    unknown = sorted(set(keys) - set(DEFAULT_KEYS))
    if unknown:
        return (
            f"unknown action(s) {', '.join(map(repr, unknown))} (the actions: "
            f"{', '.join(DEFAULT_KEYS)})"
        )
    owners: dict[str, str] = {}
    for action, chosen in {**DEFAULT_KEYS, **keys}.items():
        for key in (part.strip() for part in chosen.split(",")):
            if not _KEY_NAME.match(key) or len(key) > 32:
                return f'{action} = {chosen!r}: {key!r} is not a key name (e.g. "ctrl+b", "f5")'
            if key in RESERVED_KEYS and action in keys:
                return f"{action} = {chosen!r}: {key} is the console's own; choose another"
            if key in owners:
                other = owners[key]
                moved = action if action in keys else other
                return (
                    f"{key!r} would be both {other} and {action}: move {moved} to a free key "
                    f"(or move {other if moved == action else action} too)"
                )
            owners[key] = action
    return None


def _number(value: object) -> bool:
    return as_number(value) is not None


# field -> (is its type right?, what it must be, a further check: the problem or None). A
# number field's check is given the number (see `as_number`).
_CHECKS: dict[str, tuple[Callable[[object], bool], str, Any]] = {
    "interval_s": (_number, "a number", lambda v: interval_problem(as_number(v) or 0.0)),
    "default_profile": (_text_or_none, "a string", lambda v: None),
    "min_desktop_headroom_gib": (
        _number,
        "a number",
        lambda v: None if (as_number(v) or 0.0) >= 0 else "must be 0 or more",
    ),
    "theme": (lambda v: isinstance(v, str), "a string", lambda v: None),
    "keys": (_keys, "a table of action = key strings", keys_problem),
    "record_sessions": (lambda v: as_bool(v) is not None, "true or false", lambda v: None),
    "gpu_probe": (
        lambda v: isinstance(v, str),
        "a string",
        lambda v: None if v in GPU_PROBES else f"must be one of {', '.join(GPU_PROBES)}",
    ),
    "fleet": (_keys, "a table of name = URL strings", lambda v: fleet_problem(v)),
}
_NUMBERS = ("interval_s", "min_desktop_headroom_gib")


def fleet_problem(table: dict[str, str]) -> str | None:
    """What is wrong with a `[fleet]` table (None: nothing): an entry that is not a box's
    name and URL, a bad Prometheus URL."""
    if not table:
        return None  # (every console start checks it: the fleet's modules only for a fleet)
    from vramtop.core.fleet_sources import table_sources

    try:
        table_sources(table)
    except ValueError as exc:
        return str(exc)
    return None


def _problems(data: Mapping[str, object]) -> list[tuple[str, str]]:
    """(field, what is wrong with it) for each field of `data` that is not usable."""
    problems = []
    for name, value in data.items():
        if name not in _CHECKS:
            problems.append((name, "unknown field (a typo?)"))
            continue
        right_type, wanted, check = _CHECKS[name]
        problem = check(value) if right_type(value) else f"must be {wanted}"
        if problem is not None:
            problems.append((name, f"{problem} (got {secrets.mask_line(repr(value))})"))
    return problems


def read_text(path: Path) -> str:
    """The text of a config file of vramtop's own (config.toml, a profile), a link followed;
    `ConfigError` when another user could have written it (`locations.read_own`), or it
    cannot be read."""
    from vramtop import locations

    try:
        return locations.read_own(path, follow=True).decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except files.UnsafeFile as exc:  # (another user's, or not a regular file)
        raise ConfigError(str(exc.strerror)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None


def read_toml(path: Path) -> dict[str, object]:
    """The table of a config file of vramtop's own (`read_text`); `ConfigError` when it
    cannot be read or is not TOML."""
    text = read_text(path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # The message already says "(at line N, column M)".
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses into each nested array or table
        raise ConfigError(f"{path}: not valid TOML: nested too deeply") from None


def settings_from(data: Mapping[str, object], path: Path) -> Settings:
    """The settings `data` (a config file's table) holds; ConfigError naming each field that
    is not usable, one line each."""
    problems = _problems(data)
    if problems:
        raise ConfigError("\n".join(f"{path}: field '{name}': {why}" for name, why in problems))
    fields: dict[str, Any] = dict(data)
    for name in _NUMBERS:  # whole numbers and quoted ones: the floats they stand for
        if name in fields:
            fields[name] = as_number(fields[name])
    if "record_sessions" in fields:
        fields["record_sessions"] = as_bool(fields["record_sessions"])
    return Settings(**fields)


def load_settings(path: Path | None = None) -> Settings:
    """The settings; defaults when the file does not exist."""
    if path is None:
        from vramtop.locations import settings_file

        path = settings_file()
    if not path.exists():
        return Settings()
    return settings_from(read_toml(path), path)


def to_toml(data: Mapping[str, object]) -> str:
    """`data` as the text of a config file, written by tomlkit (which also edits a profile in
    place, `profile_file.save_relaunch_file`): a list one item a line, as a long command line
    reads best; a table as a `[table]`, a list of tables as `[[table]]` entries."""
    import tomlkit  # (only when a file is written: the settings load without it)

    document = tomlkit.document()
    for key, value in data.items():
        item = tomlkit.item(value)
        if isinstance(item, tomlkit.items.Array) and len(item):
            item.multiline(True)
        document.add(key, item)
    return tomlkit.dumps(document)


def settings_to_toml(settings: Settings) -> str:
    data = {k: v for k, v in dataclasses.asdict(settings).items() if v is not None}
    return to_toml(data)


def write_private(path: Path, text: str) -> None:
    """Write `text` atomically to a file only the user can read (mode 0600); a link there
    is refused (`ConfigError`, see `link_problem`)."""
    files.private_dir(path.parent)
    problem = link_problem(path)
    if problem is not None:
        raise ConfigError(problem)
    files.write_atomic(path, text.encode("utf-8"))


def link_problem(path: Path) -> str | None:
    """Why vramtop will not write a config file of the person's (config.toml, a profile):
    it is a symbolic link (one kept with dotfiles, say). It is read through the link, but
    written neither through it (its target may be anyone's file) nor over it (the link
    would silently become a file of its own)."""
    if not path.is_symlink():
        return None
    shown = os.readlink(path)
    word = shell_word(str(path))
    return (
        f"{path} is a symbolic link to {shown}, and vramtop does not write through links "
        f"nor over them: change {shown} yourself, or replace the link with the file "
        f'(`cp --remove-destination "$(readlink -f {word})" {word}`) and try again'
    )


def save_settings(settings: Settings, path: Path | None = None) -> None:
    if path is None:
        from vramtop.locations import settings_file

        path = settings_file()
    write_private(path, settings_to_toml(settings))
