"""Classes that had grown to do several jobs are split into collaborators, one job each: each
keeps under 15 methods (every `def` in its body counted, as `bench.bench_code_shape` counts)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import vramtop
from tests.support.source_trees import tree_of

PACKAGE = Path(vramtop.__file__).parent
LIMIT = 15

SPLIT = {
    "ServerHandle": "supervisor/handle.py",
    "ReplayBackend": "machines/replay_backend.py",
    "Gate": "frontdoor/gate.py",
    "DoorControl": "supervisor/door_steps.py",
    "MachineControl": "machines/machine_control.py",
}


def _methods(module: Path, name: str) -> int:
    for node in ast.walk(tree_of(module)):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return sum(isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef) for b in node.body)
    raise AssertionError(f"{name} is not in {module}")


@pytest.mark.parametrize(("name", "module"), sorted(SPLIT.items()))
def test_the_class_keeps_to_one_job(name: str, module: str) -> None:
    assert _methods(PACKAGE / module, name) < LIMIT
