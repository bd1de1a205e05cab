"""`dict[str, Any]` only where JSON (or another file format) is read or written.

A value built inside vramtop has a type of its own (a dataclass, a `JsonValue` where it is
written as it is); `dict[str, Any]` and `Mapping[str, Any]` belong to the modules that parse
or write a file format, which import `json`, `tomllib`, `tomlkit` or `yaml`. Every module
holds to it, with no list of exceptions.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.source_trees import parsed

PACKAGE = Path(__file__).resolve().parents[2] / "vramtop"
ANY_DICT = re.compile(r"\b(?:dict|Mapping)\[str, Any\]")
FORMATS = {"json", "tomllib", "tomlkit", "yaml"}


def _imports_a_format(tree: ast.Module) -> bool:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names.add(node.module)
    return any(name.split(".")[0] in FORMATS for name in names)


def offenders() -> set[str]:
    """Modules that use `dict[str, Any]` or `Mapping[str, Any]` and import no file format."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if ANY_DICT.search(text) and not _imports_a_format(parsed(text)):
            found.add(path.relative_to(PACKAGE).as_posix())
    return found


def test_any_dicts_only_in_modules_that_read_or_write_a_file_format() -> None:
    found = offenders()
    assert not found, f"type these values (a dataclass, or JsonValue where written as is): {found}"


def test_the_rule_sees_a_module_that_breaks_it(tmp_path: Path) -> None:
    plain = "from typing import Any\n\ndef f() -> dict[str, Any]:\n    return {}\n"
    writes = "import json\n" + plain
    assert ANY_DICT.search(plain) and not _imports_a_format(ast.parse(plain))
    assert _imports_a_format(ast.parse(writes))
    assert _imports_a_format(ast.parse("from yaml import safe_load\n"))
    assert ANY_DICT.search("def g(m: Mapping[str, Any]) -> None: ...\n")
