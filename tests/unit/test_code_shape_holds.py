"""The code's shape stays where the restructuring brought it (issue 40's figures, counted as
`python -m bench.bench_code_shape` counts them): at most four modules over 400 lines, at most
six classes with 15 methods or more, `Any` named at most 100 times, at most three dataclass
fields that call a budget by vLLM's names (the types that mirror vLLM's own formats), and one
module that calls the front door's hold, release and fail. A change that grows past one of
them splits a module or a class along its seam instead."""

from __future__ import annotations

from pathlib import Path

import vramtop
from bench.bench_code_shape import shape

PACKAGE = Path(vramtop.__file__).parent


def test_the_code_keeps_its_shape() -> None:
    found = shape(PACKAGE, circles=False)  # (tests/unit/test_import_circles.py counts them)
    assert len(found.long_modules) <= 4, found.long_modules
    assert len(found.big_classes) <= 6, found.big_classes
    assert found.any_uses <= 100, found.any_uses
    assert len(found.budget_fields) <= 3, found.budget_fields
    assert found.door_callers == ["vramtop/supervisor/door_steps.py"], found.door_callers
