"""One door to the machine, one reading of the command line: no module of vramtop asks for an
attribute of the parsed arguments or of a backend by name (`getattr(args, "demo", False)`,
`getattr(backend, "session", None)`). A command reads its options once into a dataclass
(commands/shared_options.py); a backend declares every member its callers use
(machines/interface.py). Read with `ast` from every module of the package."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import vramtop
from tests.support.source_trees import tree_of

PACKAGE = Path(vramtop.__file__).parent
# What a getattr must not be called on: the parsed arguments, and a backend however it is held.
NAMES = frozenset({"args", "backend"})
ATTRIBUTES = frozenset({"backend", "_backend"})


def _reached_past(node: ast.expr) -> str | None:
    """The object a getattr reaches past, as written, where it is one of the forbidden ones."""
    if isinstance(node, ast.Name) and node.id in NAMES:
        return node.id
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and node.attr in ATTRIBUTES
    ):
        return f"self.{node.attr}"
    return None


def offences(package: Path) -> list[str]:
    """Every `getattr(<args or a backend>, …)` in the package at `package`, as `file:line`."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = tree_of(path)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and node.args
            ):
                reached = _reached_past(node.args[0])
                if reached is not None:
                    where = path.relative_to(package.parent)
                    found.append(f"{where}:{node.lineno} getattr({reached}, …)")
    return sorted(found)


def test_no_module_reaches_past_the_options_or_the_backend() -> None:
    assert offences(PACKAGE) == []


def test_a_planted_getattr_on_the_arguments_or_a_backend_is_found(tmp_path: Path) -> None:
    # A rule that finds nothing whatever the code did would pass anyway.
    copy = tmp_path / "vramtop"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    planted = copy / "commands" / "planted.py"
    planted.write_text(
        "def run(args, backend, other):\n"
        "    demo = getattr(args, 'demo', False)\n"
        "    session = getattr(backend, 'session', None)\n"
        "    fine = getattr(other, 'name', None)\n"
        "    return demo, session, fine\n"
        "class Console:\n"
        "    def show(self):\n"
        "        return getattr(self.backend, 'demo'), getattr(self._backend, 'url', None)\n",
        encoding="utf-8",
    )
    assert offences(copy) == [
        "vramtop/commands/planted.py:2 getattr(args, …)",
        "vramtop/commands/planted.py:3 getattr(backend, …)",
        "vramtop/commands/planted.py:8 getattr(self._backend, …)",
        "vramtop/commands/planted.py:8 getattr(self.backend, …)",
    ]
