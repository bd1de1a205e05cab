"""A command's words as one line to copy into a shell: each word read back as itself by bash or
zsh, and always one line (a screen of `vramtop status`, or a line in a log vramtop reads back).

A word of printable text is quoted as `shlex.quote` quotes it (portable to any POSIX shell). A
word with a line break, a tab or another unprintable character is written in ANSI-C quoting,
`$'…'` (bash, zsh, ksh, busybox sh and POSIX.1-2024), its characters escaped: a line break as
`\\n`, not a line of its own, so that nothing in a word can pass for a line of what is shown
around it. Bytes that are not UTF-8 (kept by Python as lone surrogates) are written back as
`\\xHH`, the bytes they were.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shell_line(words: Sequence[str]) -> str:
    """The words as one line of shell text."""
    return " ".join(shell_word(word) for word in words)


def shell_word(word: str) -> str:
    if word.isprintable():
        return shlex.quote(word)
    return "$'" + "".join(_escaped(char) for char in word) + "'"


def _escaped(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    if char.isprintable():
        return char
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
