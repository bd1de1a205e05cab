"""Every change of a record's state goes through `state_moves.move`, checked against its table.

The code is read: no assignment to a `.state` anywhere in the package but the one in `move`
(so every move the code makes is checked against the table when it runs, and the
supervisor's tests run each of them), and every record built names a state a record may be
born in. The table itself: the moves it refuses are refused."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import vramtop
from tests.support.source_trees import tree_of
from vramtop.supervisor import state_moves
from vramtop.supervisor.state import Lifecycle, ServerRecord
from vramtop.supervisor.state_moves import BORN, MOVES, RefusedMove, allowed, move

PACKAGE = Path(vramtop.__file__).parent
MOVER = Path(state_moves.__file__)


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found: list[ast.expr] = []
        for target in node.targets:
            found += list(target.elts) if isinstance(target, ast.Tuple) else [target]
        return found
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    return []


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(path, tree_of(path)) for path in sorted(PACKAGE.rglob("*.py"))]


def test_no_state_is_assigned_outside_the_move_function() -> None:
    direct = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}"
        for path, tree in _modules()
        for node in ast.walk(tree)
        for target in _targets(node)
        if isinstance(target, ast.Attribute) and target.attr == "state" and path != MOVER
    ]
    assert direct == [], f"state assigned without state_moves.move: {direct}"


def test_every_record_built_is_born_in_a_state_the_table_allows() -> None:
    born: list[tuple[str, str]] = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ServerRecord":
                for word in node.keywords:
                    if word.arg == "state":
                        born.append(
                            (f"{path.relative_to(PACKAGE)}:{node.lineno}", ast.unparse(word.value))
                        )
    assert born, "no record built with a state: the check reads nothing"
    names = {f"Lifecycle.{state.name}" for state in BORN}
    assert [b for b in born if b[1] not in names] == []


def test_the_table_names_every_state() -> None:
    assert set(MOVES) == set(Lifecycle)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # A stop that was asked for is never a crash, whatever the stop found.
        (Lifecycle.STOPPING, Lifecycle.CRASHED),
        # Only a launch (a new record) or a found server starts.
        (Lifecycle.STOPPED, Lifecycle.STARTING),
        (Lifecycle.CRASHED, Lifecycle.STARTING),
        (Lifecycle.RUNNING, Lifecycle.STARTING),
        # A server that is not there does not serve.
        (Lifecycle.STOPPED, Lifecycle.RUNNING),
        (Lifecycle.CRASHED, Lifecycle.RUNNING),
        (Lifecycle.LAUNCHING, Lifecycle.RUNNING),
        # Nothing goes back to before its pid was known.
        (Lifecycle.STARTING, Lifecycle.LAUNCHING),
        (Lifecycle.STOPPED, Lifecycle.LAUNCHING),
    ],
)
def test_a_move_the_table_refuses_is_refused_and_leaves_the_record(
    before: Lifecycle, after: Lifecycle
) -> None:
    rec = ServerRecord(profile="p", state=before)
    assert not allowed(before, after)
    with pytest.raises(RefusedMove, match=f"{before.value} -> {after.value}"):
        move(rec, after)
    assert rec.state is before


def test_a_move_the_table_allows_is_made_and_staying_is_always_allowed() -> None:
    rec = ServerRecord(profile="p", state=Lifecycle.LAUNCHING)
    for step in (Lifecycle.STARTING, Lifecycle.RUNNING, Lifecycle.STOPPING, Lifecycle.STOPPED):
        move(rec, step)
        move(rec, step)
        assert rec.state is step
