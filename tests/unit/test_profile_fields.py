"""Each kind of value a profile holds refuses what breaks its rule, on its own: the field
types of profile_fields, as pydantic reads them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from vramtop import profile_fields as fields


@pytest.mark.parametrize(
    ("kind", "value", "said"),
    [
        (fields.ProfileName, "a/b", "use "),
        (fields.CommandLine, [], "the command line is empty"),
        (fields.Environment, {"A=B": "1"}, "'A=B' is not one"),
        (fields.Environment, {"A\0": "1"}, "a variable's name holds a NUL"),
        (fields.VariableName, "MY\0KEY", "holds a NUL"),
        (fields.Port, 70000, "between 1 and 65535"),
        (fields.DoorAddress, "127.0.0.1\0:8000", "holds a NUL"),
        (fields.Seconds, 0.0, "more than 0"),
        (fields.SecondsOrZero, -1.0, "0 or more"),
    ],
)
def test_each_kind_of_value_refuses_what_breaks_its_rule(kind: Any, value: Any, said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        TypeAdapter(kind).validate_python(value)


def test_values_within_their_rules_are_taken_as_they_are() -> None:
    assert TypeAdapter(fields.Environment).validate_python({"A_1": "x"}) == {"A_1": "x"}
    assert TypeAdapter(fields.DoorAddress).validate_python("[::1]:8000") == "[::1]:8000"
    assert TypeAdapter(fields.SecondsOrZero).validate_python(0.0) == 0.0
    assert fields.refuse_nul(["vllm", "serve"]) == ["vllm", "serve"]
