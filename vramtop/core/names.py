"""The rule for a profile's name, in one place: the name is also its file's (profiles/NAME.toml)
and is typed on command lines, so it is kept portable and free of path separators."""

from __future__ import annotations

import re

_PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

PROFILE_NAME_RULE = "letters, digits, '.', '_' or '-' (up to 64, starting with a letter or digit)"
"""What a profile's name may be, in words for messages."""


def is_profile_name(name: str) -> bool:
    return _PROFILE_NAME.fullmatch(name) is not None
