"""One file name, one module: two modules of the package with the same file name (two
runner.py, two remedy.py) make every search, traceback and conversation ask "which one?".
The names still shared are listed below; the list may only shrink."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import vramtop

PACKAGE = Path(vramtop.__file__).parent
# A package's own files: every package has one of each.
_EVERY_PACKAGE = frozenset(("__init__.py", "__main__.py"))

# File names still held by two modules, with where. Each pair was left when the others were
# renamed because both modules, or modules that import them, were being reworked by other
# changes at the time. Remove a name once one of its modules is renamed; never add one (name
# a new module for what it is).
STILL_SHARED: frozenset[str] = frozenset()


def shared_names(package: Path) -> dict[str, list[str]]:
    """Each file name two or more modules under `package` have, with their paths."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        if path.name not in _EVERY_PACKAGE:
            where[path.name].append(str(path.relative_to(package.parent)))
    return {name: paths for name, paths in where.items() if len(paths) > 1}


def test_no_new_shared_module_name() -> None:
    new = {name: paths for name, paths in shared_names(PACKAGE).items() if name not in STILL_SHARED}
    assert not new, f"module file names used twice (name one for what it is): {new}"


def test_the_list_of_shared_names_only_shrinks() -> None:
    gone = sorted(STILL_SHARED - set(shared_names(PACKAGE)))
    assert not gone, f"no longer shared, remove from STILL_SHARED: {gone}"


def test_shared_names_are_found(tmp_path: Path) -> None:
    for path in ("pkg/a/state.py", "pkg/b/state.py", "pkg/a/__init__.py", "pkg/b/__init__.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    (tmp_path / "pkg/b/other.py").write_text("")
    assert shared_names(tmp_path / "pkg") == {"state.py": ["pkg/a/state.py", "pkg/b/state.py"]}
