"""The code's shape, counted from the code itself: the figures the architecture work is held
to, for the tree here and, side by side in one run, for an earlier commit.

Printed per tree: import circles among vramtop's modules (every import counts, as
tests/unit/test_import_circles.py reads them), modules over 400 lines, classes with 15 or
more methods (and the largest), module file names that appear twice in the package, uses of
`Any`, dataclass fields that call a budget by a flag's or a JSON key's name (`util`,
`gpu_memory_utilization`, `requested_util`, `calibrated_util`), and the modules that call
the door's hold, release or fail.

    python -m bench.bench_code_shape [--against COMMIT]
"""

from __future__ import annotations

import argparse
import ast
import collections
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.unit.test_import_circles import _circles, _graph

ROOT = Path(__file__).resolve().parents[1]
BUDGET_NAMES = {"util", "gpu_memory_utilization", "requested_util", "calibrated_util"}
DOOR_CALLS = {"hold", "release", "fail"}


@dataclass(frozen=True)
class Shape:
    circles: int
    long_modules: list[tuple[int, str]]
    big_classes: list[tuple[int, str]]
    twice_named: list[str]
    any_uses: int
    budget_fields: list[str]
    door_callers: list[str]


def _is_dataclass(node: ast.ClassDef) -> bool:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


def _names_any(node: ast.AST) -> bool:
    """`Any` or `typing.Any`."""
    if isinstance(node, ast.Name):
        return node.id == "Any"
    return isinstance(node, ast.Attribute) and node.attr == "Any"


def _door_call(node: ast.Call) -> bool:
    """`door.hold(…)`, `self.door.release(…)`, `self._door.fail(…)`: a call on a door."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr in DOOR_CALLS):
        return False
    owner = func.value
    name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
    return "door" in name.lower()


def shape(package: Path, *, circles: bool = True) -> Shape:
    """The figures of `package`; `circles=False` leaves the import graph out (0: the
    suite's tests/unit/test_import_circles.py counts them)."""
    files = sorted(package.rglob("*.py"))
    long_modules, big_classes, budget_fields, door_callers = [], [], [], []
    any_uses = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(package.parent).as_posix()
        lines = len(text.splitlines())
        if lines > 400:
            long_modules.append((lines, where))
        calls_door = False
        for node in ast.walk(ast.parse(text)):
            if _names_any(node):
                any_uses += 1
            elif isinstance(node, ast.ClassDef):
                methods = [
                    b for b in node.body if isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef)
                ]
                if len(methods) >= 15:
                    big_classes.append((len(methods), f"{node.name} ({where})"))
                if _is_dataclass(node):
                    for item in node.body:
                        if (
                            isinstance(item, ast.AnnAssign)
                            and isinstance(item.target, ast.Name)
                            and item.target.id in BUDGET_NAMES
                        ):
                            budget_fields.append(f"{node.name}.{item.target.id} ({where})")
            elif isinstance(node, ast.Call) and _door_call(node):
                calls_door = True
        if calls_door:
            door_callers.append(where)
    names = collections.Counter(
        p.name for p in files if p.name not in ("__init__.py", "__main__.py")
    )
    return Shape(
        circles=len(_circles(_graph(package))) if circles else 0,
        long_modules=sorted(long_modules, reverse=True),
        big_classes=sorted(big_classes, reverse=True),
        twice_named=sorted(name for name, count in names.items() if count > 1),
        any_uses=any_uses,
        budget_fields=budget_fields,
        door_callers=door_callers,
    )


def _tree_at(commit: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "archive", commit, "vramtop"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "vramtop"


def report(label: str, found: Shape) -> None:
    print(f"== {label}")
    print(f"import circles                  {found.circles}")
    print(f"modules over 400 lines          {len(found.long_modules)}")
    for lines, where in found.long_modules:
        print(f"    {lines:5d} {where}")
    print(f"classes with >= 15 methods      {len(found.big_classes)}")
    for methods, name in found.big_classes:
        print(f"    {methods:5d} {name}")
    print(
        f"file names twice in the package {len(found.twice_named)}  {' '.join(found.twice_named)}"
    )
    print(f"uses of Any                     {found.any_uses}")
    print(f"budget fields named util/...    {len(found.budget_fields)}")
    for field in found.budget_fields:
        print(f"          {field}")
    print(
        f"modules calling the door        {len(found.door_callers)}  {' '.join(found.door_callers)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", help="an earlier commit, counted beside the tree here")
    args = parser.parse_args()
    if args.against:
        with tempfile.TemporaryDirectory() as tmp:
            report(f"at {args.against}", shape(_tree_at(args.against, Path(tmp))))
    report("here", shape(ROOT / "vramtop"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
