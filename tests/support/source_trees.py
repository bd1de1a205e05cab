"""Modules parsed once per test process. The rule tests (layers and imports, locks, waits, a
record's states, the glossary, the door's owner…) each walk every module of vramtop, and
parsing is most of what they cost: about a second of CPU for the package, paid again by each
of a dozen tests, and by those that plant an offence in a copy of it. A text is parsed once
and its tree shared, wherever the file lies: the rules only read trees."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


def tree_of(path: Path) -> ast.Module:
    """The module at `path`, as its file reads now, parsed."""
    return parsed(path.read_text(encoding="utf-8"))


@functools.cache
def parsed(source: str) -> ast.Module:
    """`ast.parse(source)`, once for each text: a tree never to be changed."""
    return ast.parse(source)
