"""The kinds of value a profile's fields hold, each with its rule: a field's type says what
it accepts, and a value that breaks the rule is refused with what is wrong, as the profile is
read (`config.Profile`).

Every text of a profile is also refused when it holds a NUL character (`refuse_nul`, which
the profile applies to every field); the types whose own rule would otherwise speak first
(a variable's name, the door's address) apply it first, so that a NUL is named as one.
"""

from __future__ import annotations

import re
from typing import Annotated, TypeVar

from pydantic import AfterValidator

from vramtop.core import secrets
from vramtop.core.addresses import parse_host_port
from vramtop.core.names import PROFILE_NAME_RULE, is_profile_name

_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
T = TypeVar("T")


def refuse_nul(value: T) -> T:
    """Every text of a profile reaches a command line, an environment or a path, none of
    which can carry a NUL character: refused when the profile is read, rather than by the
    system call at start."""
    where = _nul_in(value)
    if where is not None:
        raise ValueError(
            f"{where}holds a NUL character (\\0), which no command line, environment or "
            "path can carry: remove it"
        )
    return value


def _nul_in(value: object) -> str | None:
    """Where a NUL character is in a field's value ("" for the value itself, "word N " in a
    list, "the value of NAME " in a table); None when it holds none."""
    if isinstance(value, str):
        return "" if "\0" in value else None
    if isinstance(value, list):
        for index, item in enumerate(value):
            if _nul_in(item) is not None:
                return f"word {index + 1} "
    if isinstance(value, dict):
        for name, item in value.items():
            if _nul_in(name) is not None:
                return "a variable's name "
            if _nul_in(item) is not None:
                return "a variable's value " if secrets.is_secret_name(name) else f"{name} "
    return None


def _a_file_name(value: str) -> str:
    if not is_profile_name(value):
        raise ValueError(f"use {PROFILE_NAME_RULE}")
    return value


def _not_empty(value: list[str]) -> list[str]:
    if not value:
        raise ValueError("the command line is empty")
    return value


def _variable_names(value: dict[str, str]) -> dict[str, str]:
    # A name with `=` would set another variable than the one written (or none); an empty
    # one is no variable at all.
    for name in value:
        if not _VARIABLE.match(name):
            shown = "" if secrets.looks_like_key(name) else f" {name[:40]!r}"
            raise ValueError(
                f"the variable name{shown} is not one (letters, digits and _, not "
                "starting with a digit; no '=', space or NUL)"
            )
    return value


def _a_variable_name(value: str) -> str:
    # A key pasted here instead of its variable's name would be shown and stored as one.
    problem = secrets.variable_name_problem(value)
    if problem is not None:
        raise ValueError(f"the value {problem}")
    return value


def _a_port(value: int) -> int:
    if not 1 <= value <= 65535:
        raise ValueError("must be between 1 and 65535")
    return value


def _a_door_address(value: str) -> str:
    parse_host_port(value)  # ValueError: the message says what is wrong
    return value


def _positive(value: float) -> float:
    if value <= 0:
        raise ValueError("must be more than 0")
    return value


def _not_negative(value: float) -> float:
    if not 0 <= value < 1e6:
        raise ValueError("must be 0 or more (seconds)")
    return value


ProfileName = Annotated[str, AfterValidator(_a_file_name)]
"""A profile's name, also its file's name."""
CommandLine = Annotated[list[str], AfterValidator(_not_empty)]
"""A command line, word by word: at least one."""
Environment = Annotated[dict[str, str], AfterValidator(refuse_nul), AfterValidator(_variable_names)]
"""Variables by name: each name one the shell can set."""
VariableName = Annotated[str, AfterValidator(refuse_nul), AfterValidator(_a_variable_name)]
"""The name of a variable that holds a key (never the key itself)."""
Port = Annotated[int, AfterValidator(_a_port)]
DoorAddress = Annotated[str, AfterValidator(refuse_nul), AfterValidator(_a_door_address)]
"""A front door's `HOST:PORT`."""
Seconds = Annotated[float, AfterValidator(_positive)]
"""A time to wait: more than 0 seconds."""
SecondsOrZero = Annotated[float, AfterValidator(_not_negative)]
"""A time to wait that may be 0 (not at all)."""
