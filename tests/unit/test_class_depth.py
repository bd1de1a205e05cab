"""No class of vramtop inherits from a class of vramtop that itself inherits from another:
state split across files by inheritance is what the console and the supervisor were
composed out of. Deriving from a library's class (Textual's App, Widget, Screen) is fine,
and so is one level of vramtop's own (a panel from TextPanel)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.source_trees import tree_of

PACKAGE = Path(__file__).resolve().parents[2] / "vramtop"


def _bases(root: Path) -> dict[str, set[str]]:
    """Each class name defined under `root`, with the names of its bases (the last part of
    a dotted base, its subscript dropped: `textual.app.App[int]` is `App`)."""
    bases: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        for node in ast.walk(tree_of(path)):
            if isinstance(node, ast.ClassDef):
                names = bases.setdefault(node.name, set())
                for base in node.bases:
                    if isinstance(base, ast.Subscript):
                        base = base.value
                    names.add(ast.unparse(base).rsplit(".", 1)[-1])
    return bases


def deep_classes(root: Path) -> list[str]:
    """The classes defined under `root` more than one level below another class of it."""
    bases = _bases(root)

    def depth(name: str, seen: frozenset[str]) -> int:
        own = [b for b in bases.get(name, ()) if b in bases and b not in seen]
        return max((1 + depth(b, seen | {name}) for b in own), default=0)

    return sorted(name for name in bases if depth(name, frozenset()) > 1)


def test_no_class_of_vramtop_inherits_more_than_one_level_deep() -> None:
    assert deep_classes(PACKAGE) == []


def test_a_planted_chain_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("class Showing(App[int]):\n    pass\n")
    (tmp_path / "b.py").write_text("from a import Showing\nclass Acting(Showing):\n    pass\n")
    (tmp_path / "c.py").write_text(
        "import b\nclass Console(b.Acting):\n    pass\nclass Panel(Widget):\n    pass\n"
        "class Flat(Panel):\n    pass\n"
    )
    assert deep_classes(tmp_path) == ["Console"]
