"""Which module a `python [interpreter options] -m MODULE args…` command line runs: one rule
for every process vramtop tells by its command line (vLLM's `python -m` forms, the front door).

Read as CPython's own option parser reads it: short options may be grouped (`-uI`), `-W` and
`-X` take a value (the rest of their word or the next word: `-X utf8`, `-Xutf8`), `-m` takes
the module the same way (`-m vramtop.frontdoor`, `-mvramtop.frontdoor`, `-Im …`) and ends the
interpreter's options, as `-c`, a script, `-` and `--` do (not a module run then). The first
word is the interpreter, by its name (`python`, `python3`, `/usr/bin/python3.12`,
`python3.13t`, `python3-dbg`, `pypy3`): a shell's `sh -c "python -m …"` is the shell, not
the module's process.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_INTERPRETER = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?[dmt]?(-dbg)?$")
# Options whose value is the rest of their word or the next word; `-c` and `-m` end the
# interpreter's own options.
_TAKES_VALUE = "WXcm"
_LONG_VALUED = frozenset({"--check-hash-based-pycs"})


@dataclass(frozen=True)
class ModuleRun:
    """The module a Python command line runs, and where the module's own arguments begin."""

    module: str
    args_start: int


def is_interpreter(word: str) -> bool:
    """Whether a command's first word names a Python interpreter (any path before it)."""
    return bool(_INTERPRETER.match(word.replace("\\", "/").rsplit("/", 1)[-1]))


def module_run(argv: Sequence[str]) -> ModuleRun | None:
    """The module `argv` runs with `-m`; None for any other command line."""
    if not argv or not is_interpreter(argv[0]):
        return None
    i = 1
    while i < len(argv):
        word = argv[i]
        if word in _LONG_VALUED:
            i += 2
            continue
        if not word.startswith("-") or word.startswith("--") or word == "-":
            return None  # a script, stdin, `--` or another long option: no module run
        option, value, i = _option_group(argv, i)
        if option == "m":
            return ModuleRun(value, i) if value else None
        if option == "c":
            return None
    return None


def _option_group(argv: Sequence[str], i: int) -> tuple[str, str, int]:
    """The group of short options at `argv[i]` (`-u`, `-uI`, `-X utf8`, `-Xutf8`, `-Im MOD`):
    the option in it that takes a value ("" for none), that value, and the next word's index."""
    word = argv[i]
    for at, option in enumerate(word[1:], start=2):
        if option in _TAKES_VALUE:
            if word[at:]:
                return option, word[at:], i + 1
            return option, argv[i + 1] if i + 1 < len(argv) else "", i + 2
    return "", "", i + 1
