"""The shape of a JSON value, for the values that are written as JSON as they are (a finding's
raw figures, an event's detail): narrower than `Any`, so a reader has to say what it expects.
Sequences and mappings (not lists and dicts) so that a `list[str]` is one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

JsonValue: TypeAlias = (
    "bool | int | float | str | Sequence[JsonValue] | Mapping[str, JsonValue] | None"
)
# A JSON object as a module builds it for writing.
JsonObject: TypeAlias = "dict[str, JsonValue]"
