"""Values written into a systemd unit file, quoted by systemd's own rules (systemd.syntax(7),
systemd.service(5) "Command lines", systemd.exec(5) `Environment=`), so that the unit runs
exactly the words it was given and no value can add a line, a word or an expansion of its own.

- A value must be printable text: a line break, carriage return or NUL ends systemd's line
  (the rest would be read as a setting of its own: another `ExecStart=`), a tab is a word
  separator, other control and invisible characters hide what a reader of the unit sees, and
  a value that is not UTF-8 makes systemd ignore the whole line. Such a value is refused
  (`UnitValueError`), never escaped.
- A word of `ExecStart=` is written as it is where it has only letters, digits and
  `_@+=:,./-`; otherwise in double quotes, with `\\` and `"` escaped by a backslash.
- `%` is written `%%` everywhere (systemd expands specifiers such as `%h`, `%n` in
  `ExecStart=` and `Environment=`), and `$` is written `$$` in `ExecStart=` (systemd expands
  `$NAME` and `${NAME}` there from the service's environment; `Environment=` expands none).
- The executable (the first word) is also read as a path: systemd refuses one with a quote or
  a backslash, and `$$` would stay doubled in it (a path is not expanded), so those are
  refused there.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Words systemd reads back as they are, with no quoting (neither `%` nor `$`: see above).
_PLAIN = re.compile(r"[A-Za-z0-9_@+=:,./-]+")
# What systemd will not take in the executable's path (its `string_is_safe`), and `$`.
_NOT_IN_A_PATH = "\"'\\$"
_NAMED = {"\n": "a line break", "\r": "a carriage return", "\0": "a NUL", "\t": "a tab"}


class UnitValueError(ValueError):
    """A value that cannot be written into a unit; the message says which and why."""


def value_problem(value: str) -> str | None:
    """Why `value` cannot be written into a systemd unit (in words, the value itself not
    repeated: it may hold a secret), or None."""
    for place, char in enumerate(value, start=1):
        if char == " " or char.isprintable():
            continue
        if 0xD800 <= ord(char) <= 0xDFFF:  # how Python keeps bytes that are not UTF-8
            return (
                f"has bytes that are not UTF-8 text (at character {place}), which a systemd "
                "unit cannot hold; give it as UTF-8"
            )
        what = _NAMED.get(char, f"the unprintable character U+{ord(char):04X}")
        return f"has {what} (character {place}), which a systemd unit cannot hold; give it without"
    return None


def exec_line(executable: str, arguments: Sequence[tuple[str, str]]) -> str:
    """`ExecStart=`'s value: `executable` (an absolute path) then each argument's words.
    `arguments` pairs each word with what it is, for the message should it be refused
    ("--on-finding"); `UnitValueError` for a word that cannot be written."""
    problem = _executable_problem(executable)
    if problem is not None:
        raise UnitValueError(f"this vramtop's path {problem}")
    words = [_quoted(executable, dollars=False)]
    for what, word in arguments:
        problem = value_problem(word)
        if problem is not None:
            raise UnitValueError(f"{what} {problem}")
        words.append(_quoted(word, dollars=True))
    return " ".join(words)


def environment_line(name: str, value: str) -> str:
    """`Environment=`'s value setting `name` to `value` (`name`: a variable name of ours)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"not a variable name: {name!r}")
    problem = value_problem(value)
    if problem is not None:
        raise UnitValueError(f"{name} {problem}")
    return _quoted(f"{name}={value}", dollars=False)


def _executable_problem(path: str) -> str | None:
    problem = value_problem(path)
    if problem is not None:
        return problem
    if not path.startswith("/"):
        return "is not absolute, and a unit runs a command by its absolute path"
    bad = next((c for c in path if c in _NOT_IN_A_PATH), None)
    if bad is not None:
        return f"has {bad!r}, which systemd does not run a command from: install vramtop elsewhere"
    return None


def _quoted(word: str, *, dollars: bool) -> str:
    if _PLAIN.fullmatch(word):
        return word
    text = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return '"' + (text.replace("$", "$$") if dollars else text) + '"'
