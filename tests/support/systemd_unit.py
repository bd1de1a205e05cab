"""How systemd reads a unit file, as a small model written from its documentation and sources
(systemd.syntax(7), systemd.service(5) "Command lines", systemd.exec(5) `Environment=`;
src/shared/conf-parser.c, src/basic/extract-word.c, src/core/load-fragment.c), for tests that
read back what vramtop writes. Strict where systemd is lenient: what systemd would expand
(a `%` specifier, a `$` variable) or take otherwise than as written is an error here, so
that a value written without its escape fails the test instead of passing by luck."""

from __future__ import annotations

import re

# systemd ends a line at any of these (read_line), and separates words by these.
LINE_ENDS = "\n\r\0"
WHITESPACE = " \t\n\r"
_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "s": " ",
}


class Unreadable(ValueError):
    """What systemd would refuse, or read otherwise than as plain words."""


def settings(text: str) -> list[tuple[str, str, str]]:
    """The unit's settings in order: (section, key, value). A line ending in a backslash
    goes on with the next; `#` and `;` lines are comments."""
    lines = re.split(f"[{re.escape(LINE_ENDS)}]", text)
    found: list[tuple[str, str, str]] = []
    section = ""
    pending = ""
    for raw in lines:
        line = pending + raw
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        line = line.strip(WHITESPACE)
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise Unreadable(f"not a setting: {line!r}")
        found.append((section, key.strip(WHITESPACE), value.strip(WHITESPACE)))
    return found


def words(value: str, *, command: bool = False) -> list[str]:
    """A value's words as `extract_first_word(EXTRACT_UNQUOTE | EXTRACT_CUNESCAPE)` gives them:
    separated by whitespace, quoted by "…" or '…' (within a word too), C escapes unescaped.
    `command`: a command line's, where a lone unquoted `;` (or `\\;`) between words is
    systemd's own (a second command): refused here."""
    out: list[str] = []
    i, n = 0, len(value)
    while True:
        while i < n and value[i] in WHITESPACE:
            i += 1
        if i == n:
            return out
        for token in (";", "\\;"):
            end = i + len(token)
            if command and value[i:end] == token and (end == n or value[end] in WHITESPACE):
                raise Unreadable("a lone ';' between words separates commands")
        word: list[str] = []
        quote: str | None = None
        while i < n:
            char = value[i]
            if char == "\\":
                text, i = _escape(value, i + 1)
                word.append(text)
                continue
            if quote is not None:
                if char == quote:
                    quote = None
                else:
                    word.append(char)
            elif char in "\"'":
                quote = char
            elif char in WHITESPACE:
                break
            else:
                word.append(char)
            i += 1
        if quote is not None:
            raise Unreadable(f"unbalanced quote in {value!r}")
        out.append("".join(word))


def _escape(value: str, i: int) -> tuple[str, int]:
    if i >= len(value):
        raise Unreadable("a backslash at the end of the value")
    char = value[i]
    if char in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[char], i + 1
    for lead, size, base in (("x", 2, 16), ("u", 4, 16), ("U", 8, 16)):
        if char == lead:
            digits = value[i + 1 : i + 1 + size]
            if len(digits) != size or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise Unreadable(f"bad \\{lead} escape")
            return chr(int(digits, base)), i + 1 + size
    if char in "01234567":
        digits = value[i : i + 3]
        if len(digits) != 3 or not all(c in "01234567" for c in digits):
            raise Unreadable("bad octal escape")
        return chr(int(digits, 8)), i + 3
    raise Unreadable(f"unknown escape \\{char}")


def specifiers(word: str) -> str:
    """`%%` as `%`; any other specifier would be expanded by systemd: refused here."""
    parts = word.split("%%")
    if any("%" in part for part in parts):
        raise Unreadable(f"a specifier systemd would expand in {word!r}")
    return "%".join(parts)


def variables(word: str) -> str:
    """`$$` as `$`; a `$` systemd would read as a variable (or leave ambiguous): refused."""
    parts = word.split("$$")
    if any("$" in part for part in parts):
        raise Unreadable(f"a variable systemd would expand in {word!r}")
    return "$".join(parts)


def exec_argv(value: str) -> list[str]:
    """The argv `ExecStart=value` runs: its words, a lone unquoted `;` refused (systemd reads it
    as a second command), specifiers and then variables resolved. The executable's path is
    not expanded for variables: a `$` in it is refused."""
    argv = [specifiers(w) for w in words(value, command=True)]
    if not argv:
        raise Unreadable("no command")
    executable = argv[0]
    if not executable.startswith("/"):
        raise Unreadable(f"not an absolute path: {executable!r}")
    if any(c in executable for c in "\"'\\$") or any(ord(c) < 32 for c in executable):
        raise Unreadable(f"systemd does not run {executable!r}")
    return [executable, *(variables(w) for w in argv[1:])]


def environment(value: str) -> dict[str, str]:
    """`Environment=value`: NAME=VALUE words, specifiers resolved, no variables expanded."""
    found: dict[str, str] = {}
    for word in words(value):
        name, sep, text = specifiers(word).partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise Unreadable(f"not an assignment: {word!r}")
        found[name] = text
    return found
