"""A launch script's variables, and the words that use them resolved to text.

A variable set in the script from a literal has a value; one set from a command or from the
environment (`export PATH="$CUDA_HOME/bin:$PATH"`) is known to exist but only gets its value
when the script runs, so a word that uses it cannot be stored in a profile (`Unresolved`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vramtop.core.bounds import cut
from vramtop.core.launch.shell_lex import SPECIAL_PARAM, Cmd, Lit, Var, Word


class Unresolved(Exception):
    """A word whose value only the running script knows; `message` says which part and why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class Variable:
    value: str | None  # None: known to exist but its value is only known at run time
    line: int
    why: str = ""
    unresolved: str = ""  # why the value could not be worked out
    secret: tuple[str, bool] | None = None
    """A key kept out of the profile: (the variable it is read from at launch, whether the
    script writes its value itself)."""


class ScriptVariables(dict[str, Variable]):
    """NAME → what the script set it to, so far."""

    def resolve(self, word: Word) -> str:
        out = []
        for seg in word.segments:
            if isinstance(seg, Lit):
                out.append(seg.text)
            elif isinstance(seg, Cmd):
                raise Unresolved(
                    f"command substitution {cut(seg.raw)} cannot be stored in a profile; "
                    "write its value instead"
                )
            else:
                out.append(self._variable(seg))
        return "".join(out)

    def resolve_or_none(self, word: Word) -> str | None:
        try:
            return self.resolve(word)
        except Unresolved:
            return None

    def _variable(self, seg: Var) -> str:
        var = self.get(seg.name)
        if var is None:
            if seg.default is not None:
                if seg.assigns:  # ${NAME:=default}: NAME holds the default from here on
                    self[seg.name] = Variable(seg.default, 0)
                return seg.default
            if seg.name in SPECIAL_PARAM:
                raise Unresolved(
                    f"{seg.raw} is one of the script's own arguments; a profile runs without "
                    "any: write the value instead"
                )
            raise Unresolved(
                f"${cut(seg.name)} is not defined in the script; write the value or set "
                f"{cut(seg.name)}=… above the command"
            )
        if var.value is None:
            raise Unresolved(
                f"${seg.name} (set on line {var.line}{var.why}) is only known when the script "
                "runs; write the value instead"
            )
        return var.value

    def assign(self, word: Word, line: int) -> tuple[str, Variable] | None:
        """`NAME=value` → (NAME, its value or why it has none); None when not an assignment."""
        first = word.segments[0] if word.segments else None
        if not isinstance(first, Lit) or first.quoted:
            return None
        match = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=", first.text)
        if not match:
            return None
        rest = Word([Lit(first.text[match.end() :], False), *word.segments[1:]], line, 0, 0)
        try:
            return match.group(1), Variable(self.resolve(rest), line)
        except Unresolved as exc:
            why = " from a command" if any(isinstance(s, Cmd) for s in rest.segments) else ""
            return match.group(1), Variable(None, line, why, exc.message)
