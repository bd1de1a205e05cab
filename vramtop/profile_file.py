"""A profile's file: read into a `Profile` (each problem one line naming the field, a key
never echoed) and written back (a relaunch's change with the file's comments and layout
kept). What a profile holds and its rules are `config`."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions
import tomlkit.items
from pydantic import ValidationError

from vramtop.config import GUARD_DEFAULTS, ConfigError, Profile, ProfileChange
from vramtop.core import secrets
from vramtop.core.vllm import args as vllm_args
from vramtop.settings import link_problem, read_text, read_toml, to_toml, write_private


def describe_validation_error(
    path: Path, exc: ValidationError, data: Mapping[str, Any] | None = None
) -> str:
    """One line per problem: the field (dotted path) and what is wrong with it. `data`: what
    was validated (to tell a key's place in argv)."""
    lines = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "(file)"
        message = secrets.mask_line(str(error["msg"]).removeprefix("Value error, "))
        if error["type"] == "extra_forbidden":
            message = "unknown field (a typo?)"
        elif error["type"] != "missing":
            shown = shown_input(error, data)
            if shown is not None:
                message += f" (got {shown})"
        lines.append(f"{path}: field '{field}': {secrets.mask_pasted_keys(message)}")
    return "\n".join(lines)


# Fields whose value may be a key typed in the wrong place: never echoed.
_KEY_FIELDS = frozenset({"api_key_env", "hf_token_env", "prelude"})


def shown_input(error: Mapping[str, Any], data: Mapping[str, Any] | None = None) -> str | None:
    """The value a validation error is about, as a message may show it (masked); None where
    it must not be shown: a whole profile (it would echo every field), the fields a key may
    be typed into (`api_key_env`, `hf_token_env`, `prelude`, a secret-named variable of
    `env`, the word after `--api-key` in `argv`), and a value that holds a key in any form."""
    loc = tuple(error.get("loc", ()))
    if not loc or "input" not in error:
        return None
    if loc[0] in _KEY_FIELDS or any(secrets.is_secret_name(str(part)) for part in loc):
        return None
    if loc[0] == "argv" and len(loc) > 1 and isinstance(loc[1], int) and data is not None:
        argv = data.get("argv")
        before = argv[loc[1] - 1] if isinstance(argv, list) and 0 < loc[1] <= len(argv) else None
        if isinstance(before, str) and vllm_args.canonical_flag(before) in vllm_args.SECRET_FLAGS:
            return None
    if loc[0] == "history" and loc[-1] in ("old", "new"):
        return None  # a relaunch's old and new values: a key's flag among them
    if isinstance(error["input"], list | dict):
        return None  # a whole command line or environment (a key among it): the message says where
    text = repr(error["input"])
    if len(text) > 200:
        text = text[:200] + "…"
    return None if secrets.written_secret(text) else text


def load_profile_file(path: Path) -> Profile:
    data = read_toml(path)
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(path, exc, data)) from None
    profile._loaded_from = path
    return profile


def profile_to_toml(profile: Profile, *, shown: bool = False) -> str:
    """The profile as TOML (absent values left out: TOML has no null).

    As it is for its file: a key the person wrote into their own profile stays as written (a
    save must never replace it with the mask). `shown`: for the screen, secrets masked."""
    data = profile.model_dump(mode="python", exclude_none=True)
    if profile.front_door is None:
        # The door's settings mean nothing without a door: left out unless the person set them.
        for name in ("front_door_hold_s", "drain_s"):
            if name not in profile.model_fields_set:
                data.pop(name, None)
    for name, default in GUARD_DEFAULTS.items():
        # The guard's settings at their defaults are left out, unless the person set them.
        if name not in profile.model_fields_set and data.get(name) == default:
            data.pop(name, None)
    if not shown:
        return to_toml(data)
    data["argv"] = profile.shown_argv()
    data["env"] = secrets.mask_env(profile.env)
    if profile.prelude:  # the person's own shell text: a key they wrote in it is shown masked
        data["prelude"] = secrets.mask_line(profile.prelude)
    for change in data.get("history", []):
        for key in ("old", "new"):
            if change["flag"] in vllm_args.SECRET_FLAGS and key in change:
                change[key] = vllm_args.MASK
    return to_toml(data)


def save_profile_file(path: Path, profile: Profile) -> None:
    write_private(path, profile_to_toml(profile))


def save_relaunch_file(path: Path, before: Profile, after: Profile) -> None:
    """Write a relaunch's change into the profile file at `path` as the person wrote it: only
    the changed flags in its `argv` and the new `history` entries change; comments, layout and
    every other word (a key written into argv included) stay. A file that is not there is
    written whole. A link is refused (`settings.link_problem`)."""
    if not path.exists():
        save_profile_file(path, after)
        return
    problem = link_problem(path)
    if problem is not None:
        raise ConfigError(problem)
    try:
        doc = tomlkit.parse(read_text(path))
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    added = after.history[len(before.history) :]
    argv = doc.get("argv")
    if not isinstance(argv, tomlkit.items.Array):
        raise ConfigError(f"{path}: field 'argv' is not a list of words")
    words = [str(word) for word in argv]
    for change in added:
        if change.new is None:
            words = vllm_args.remove_flag(words, change.flag)
        else:
            words = vllm_args.set_flag(words, change.flag, change.new)
    _edit_words(argv, words)
    if tomllib.loads(tomlkit.dumps(doc)).get("argv") != words:
        doc["argv"] = words  # (an array tomlkit could not edit in place: written anew)
    _add_history(doc, added)
    written = tomlkit.dumps(doc)
    try:  # what is written must load again
        Profile.model_validate(tomllib.loads(written))
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        raise ConfigError(f"{path}: the relaunch's change would not load again ({exc})") from None
    write_private(path, written)


def _edit_words(array: tomlkit.items.Array, words: list[str]) -> None:
    """Make `array` hold `words`, changing only the words that differ (the rest, and the
    comments between them, stay where they are); words added at the end go on a line of
    their own in an array written one word group a line (after a comment, they would
    otherwise be part of it)."""
    old = [str(word) for word in array]
    start = 0
    while start < min(len(old), len(words)) and old[start] == words[start]:
        start += 1
    end_old, end_new = len(old), len(words)
    while end_old > start and end_new > start and old[end_old - 1] == words[end_new - 1]:
        end_old, end_new = end_old - 1, end_new - 1
    shared = min(end_old, end_new) - start
    for i in range(start, start + shared):
        array[i] = words[i]
    for i in range(end_old - 1, start + shared - 1, -1):
        del array[i]
    added = words[start + shared : end_new]
    if not added:
        return
    if start + shared == len(array) and "\n" in array.as_string():
        array.add_line(*added, indent=_indent_of(array))
    else:
        for i, word in enumerate(added, start + shared):
            array.insert(i, word)


def _indent_of(array: tomlkit.items.Array) -> str:
    """The indent of the array's last line of words (two spaces when none is seen)."""
    lines = [line for line in array.as_string().splitlines()[1:] if line.strip(" \t[]")]
    last = lines[-1] if lines else ""
    return last[: len(last) - len(last.lstrip(" \t"))] or "  "


def _add_history(doc: tomlkit.TOMLDocument, added: list[ProfileChange]) -> None:
    """Append the relaunch's changes to the file's `history` (an array of tables, or the
    inline array the person wrote)."""
    if not added:
        return
    rows = [change.model_dump(mode="python", exclude_none=True) for change in added]
    history = doc.get("history")
    if history is None:
        doc.add(tomlkit.nl())
        history = tomlkit.aot()
        doc.append("history", history)
    for row in rows:
        if isinstance(history, tomlkit.items.AoT):
            table = tomlkit.table()
            table.update(row)
            history.append(table)
        else:
            inline = tomlkit.inline_table()
            inline.update(row)
            history.append(inline)
