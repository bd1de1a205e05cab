"""No import circles among vramtop's modules: two modules that import each other, directly or
round a longer loop, cannot be read, tested or moved one without the other.

Every import counts, as test_import_rules.py reads them: at the top of a module, inside a
function (loaded late), and under TYPE_CHECKING. A late import only hides a circle from the
interpreter, and a type-only one still makes each module need the other to be understood:
the three circles this test was written against were hidden by exactly those (the guard's
command, watch and unit by late imports; core/budget ↔ core/headroom/terms and tui/app ↔
tui/runner by type-only ones)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import vramtop
from tests.support.source_trees import tree_of

PACKAGE = Path(vramtop.__file__).parent


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph(package: Path) -> dict[str, set[str]]:
    """Each module of `package`, with the modules of the package it imports. `from a import
    b` is an import of module `a.b` where there is one, else of `a`; an import names the
    module that holds it (`a.b.Thing` → `a.b`)."""
    root = package.parent
    modules = {_module_name(path, root): path for path in package.rglob("*.py")}

    def holder(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(tree_of(path)):
            if isinstance(node, ast.Import):
                found.update(filter(None, (holder(alias.name) for alias in node.names)))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                for alias in node.names:
                    target = holder(f"{base}.{alias.name}")
                    if target is not None:
                        found.add(target)
        found.discard(name)
        graph[name] = found
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's circles: each set of modules that all reach one another (Tarjan's strongly
    connected components of more than one module), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(circles)


def test_no_module_of_vramtop_is_in_an_import_circle() -> None:
    assert _circles(_graph(PACKAGE)) == []


def test_the_reader_sees_the_imports_it_judges() -> None:
    # A rule that read no import would pass whatever the code did.
    graph = _graph(PACKAGE)
    assert "vramtop.core.model" in graph["vramtop.core.counter_window"]
    # `from vramtop.supervisor import tree` imports the module tree, not the package.
    assert "vramtop.supervisor.tree" in graph["vramtop.supervisor.launch"]


def test_a_circle_hidden_in_a_function_or_under_type_checking_is_found(tmp_path: Path) -> None:
    copy = tmp_path / "vramtop"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.json"))
    # A late import one way, a type-only one the other way.
    (copy / "core" / "planted_a.py").write_text(
        "def late() -> None:\n    from vramtop.core import planted_b\n", encoding="utf-8"
    )
    (copy / "core" / "planted_b.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from vramtop.core.planted_a import late\n",
        encoding="utf-8",
    )
    assert _circles(_graph(copy)) == [["vramtop.core.planted_a", "vramtop.core.planted_b"]]
