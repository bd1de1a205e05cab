"""The front door's hold, release and fail are asked in one place: `DoorControl`
(supervisor/door_steps.py), the one owner of the door's control for a server, which every
step asks. The package is read: no other module calls those routes, nor imports them."""

from __future__ import annotations

import ast
from pathlib import Path

import vramtop
from tests.support.source_trees import tree_of
from vramtop.supervisor import door_steps

PACKAGE = Path(vramtop.__file__).parent
OWNER = Path(door_steps.__file__)
ROUTES = {"hold", "release", "fail"}


def test_the_doors_hold_release_and_fail_are_asked_only_by_its_owner() -> None:
    callers: list[str] = []
    owner_calls = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = tree_of(path)
        for node in ast.walk(tree):
            asks = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ROUTES
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "door"
            )
            imports = (
                isinstance(node, ast.ImportFrom)
                and node.module == "vramtop.supervisor.door"
                and any(alias.name in ROUTES for alias in node.names)
            )
            if path == OWNER:
                owner_calls += asks
            elif asks or imports:
                callers.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert callers == [], f"the door's control asked outside DoorControl: {callers}"
    assert owner_calls >= len(ROUTES)  # (the check reads the calls it is about)
