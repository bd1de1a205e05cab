"""Bash text → words and operators, keeping what quoting and `$` did to each part.

Done here rather than with `shlex`: shlex cannot tell `'$PORT'` (literal) from `$PORT`
(expanded) or a quoted `'|'` from a pipe, and those differences are what a launch script's
messages are about. Line continuations are followed (and a trailing space after one is
refused), so every token knows the line it starts on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class ShellSyntaxError(ValueError):
    """The text cannot be tokenised: a quote never closed, a here-document, a cut-off line."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass(frozen=True)
class Lit:
    text: str
    quoted: bool


@dataclass(frozen=True)
class Var:
    name: str
    raw: str
    default: str | None = None  # ${NAME:-default}, ${NAME:=default}
    assigns: bool = False  # ${NAME:=default}: the default is also assigned to NAME


@dataclass(frozen=True)
class Cmd:
    raw: str  # $(…), `…`, <(…) or >(…); ${…} for an expansion not evaluated here

    @property
    def script(self) -> str | None:
        """The commands it runs (`$(echo hi)` → `echo hi`); None for a `${…}` expansion."""
        if self.raw.startswith("`"):
            return self.raw[1:-1]
        if self.raw[1:2] == "(":
            return self.raw[2:-1]
        return None


Segment = Lit | Var | Cmd


@dataclass
class Word:
    segments: list[Segment]
    line: int
    start: int
    end: int

    @property
    def raw_text(self) -> str:
        out = []
        for seg in self.segments:
            out.append(seg.text if isinstance(seg, Lit) else seg.raw)
        return "".join(out)

    @property
    def literal(self) -> str | None:
        """The text when the word expands nothing."""
        if all(isinstance(s, Lit) for s in self.segments):
            return "".join(s.text for s in self.segments if isinstance(s, Lit))
        return None


@dataclass(frozen=True)
class Op:
    text: str
    line: int
    start: int
    end: int


Token = Word | Op

_OPS: tuple[str, ...] = ("<<<", "<<-", "&&", "||", ";;", ">>", "<<", ">&", "<&", "&>", ">|")
_OPS = (*_OPS, "|", "&", ";", "<", ">", "(", ")")
_FD_REDIRECT = re.compile(r"\d+(>>|>&|<&|>|<)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# `NAME=` or `NAME+=` right before `(`: an array's assignment.
_ARRAY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
# The escapes of bash's $'…' quoting.
_ANSI_ESCAPE = re.compile(
    r"\\(?:[abeEfnrtv\\'\"?]|[0-7]{1,3}|x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8})"
)
_ANSI_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r"}
_ANSI_SIMPLE |= {"t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _ansi_char(escape: str) -> str:
    body = escape[1:]
    if body in _ANSI_SIMPLE:
        return _ANSI_SIMPLE[body]
    if body[0] in "xuU":
        return chr(min(int(body[1:], 16), 0x10FFFF))
    return chr(int(body, 8) & 0xFF)


SPECIAL_PARAM = set("@*#?$!0123456789-")
"""`$@`, `$1`, `$?`…: the shell's own parameters, never set by the script."""


def tokenize(text: str) -> list[Token]:
    """Words and operators (a newline is an `Op` too); raises `ShellSyntaxError`."""
    return _Lexer(text).tokens()


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1

    def fail(self, line: int, message: str) -> ShellSyntaxError:
        return ShellSyntaxError(line, message)

    def tokens(self) -> list[Token]:
        out: list[Token] = []
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c == "\n":
                out.append(Op("\n", self.line, self.i, self.i + 1))
                self.line += 1
                self.i += 1
            elif c in " \t":
                self.i += 1
            elif c == "#":
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
            elif c in "<>" and text.startswith("(", self.i + 1):
                out.append(self._word_at_process_substitution())
            elif c in "|&;<>()":
                out.append(self._operator())
            elif match := _FD_REDIRECT.match(text, self.i):
                out.append(Op(match.group(0), self.line, self.i, match.end()))
                self.i = match.end()
            else:
                word = self._word()
                if word is not None:
                    out.append(word)
        return out

    def _operator(self) -> Op:
        op = next(o for o in _OPS if self.text.startswith(o, self.i))
        if op in ("<<", "<<-"):
            raise self.fail(self.line, "here-documents (<<) are not supported")
        token = Op(op, self.line, self.i, self.i + len(op))
        self.i += len(op)
        return token

    def _word_at_process_substitution(self) -> Word:
        """`<(…)` or `>(…)`: a word (a file name the shell makes) whose value only the
        running shell knows, as `$(…)`'s."""
        word = self._word()
        assert word is not None
        return word

    def _continuation(self) -> bool:
        """At a backslash: a line continuation (consumed), or an escaped character."""
        text = self.text
        rest = text[self.i + 1 :]
        if rest == "" or rest == "\n" or rest.strip(" \t\n") == "":
            raise self.fail(
                self.line,
                "the script ends with a line continuation ('\\'): the command is cut off",
            )
        if rest.startswith("\n"):
            self.i += 2
            self.line += 1
            return True
        spaces = re.match(r"[ \t]+\n", rest)
        if spaces:
            raise self.fail(
                self.line,
                "a space after the line-continuation '\\' ends the command here, and the next "
                "line would run on its own; remove the trailing space",
            )
        return False

    def _word(self) -> Word | None:
        text = self.text
        start, line = self.i, self.line
        segments: list[Segment] = []
        buf: list[str] = []

        def flush(quoted: bool = False) -> None:
            if buf:
                segments.append(Lit("".join(buf), quoted))
                buf.clear()

        while self.i < len(text):
            c = text[self.i]
            if c in "<>" and text.startswith("(", self.i + 1):
                flush()
                segments.append(self._command_substitution())
                continue
            if c == "(" and _ARRAY.fullmatch("".join(buf)) and len(segments) == 0:
                raise self.fail(
                    self.line,
                    f"an array ({''.join(buf)}(…)) is not supported in a launch script: give "
                    "each value a variable of its own",
                )
            if c in " \t\n" or c in "|&;<>()":
                break
            if c == "\\":
                if self._continuation():
                    if not buf and not segments:
                        return None  # a continuation between words
                    continue
                buf.append(text[self.i + 1])
                self.i += 2
            elif c == "'":
                flush()
                segments.append(self._single_quoted())
            elif c == '"':
                flush()
                self._double_quoted(segments)
            elif c == "$" and text.startswith("'", self.i + 1):
                flush()
                segments.append(self._ansi_c_quoted())
            elif c == "$":
                flush()
                segments.append(self._dollar())
            elif c == "`":
                flush()
                segments.append(self._backtick())
            else:
                buf.append(c)
                self.i += 1
        flush()
        return Word(segments, line, start, self.i)

    def _single_quoted(self) -> Lit:
        text = self.text
        end = text.find("'", self.i + 1)
        if end < 0:
            raise self.fail(self.line, "a single quote (') opened here is never closed")
        lit = Lit(text[self.i + 1 : end], quoted=True)
        self.line += text.count("\n", self.i, end)
        self.i = end + 1
        return lit

    def _ansi_c_quoted(self) -> Lit:
        """At `$'`: the text up to the closing quote, its backslash escapes decoded as bash
        does (`\\n`, `\\t`, `\\'`, `\\x41`, `\\101`, `\\u00e9`…); one it cannot decode here
        (`\\c`, a NUL) is refused."""
        text = self.text
        open_line = self.line
        i = self.i + 2
        out: list[str] = []
        while True:
            if i >= len(text):
                raise self.fail(open_line, "a quote $' opened here is never closed")
            c = text[i]
            if c == "'":
                break
            if c != "\\":
                self.line += c == "\n"
                out.append(c)
                i += 1
                continue
            match = _ANSI_ESCAPE.match(text, i)
            if match is None:
                raise self.fail(
                    self.line,
                    f"the escape {text[i : i + 2]!r} in $'…' is not supported: write the "
                    "character itself",
                )
            char = _ansi_char(match.group(0))
            if char == "\0":
                raise self.fail(self.line, "a NUL character (\\0) in $'…' cannot be passed on")
            out.append(char)
            i = match.end()
        self.i = i + 1
        return Lit("".join(out), quoted=True)

    def _double_quoted(self, segments: list[Segment]) -> None:
        text = self.text
        open_line = self.line
        self.i += 1
        buf: list[str] = []
        # An empty "" still makes a word (an empty argument).
        segments.append(Lit("", quoted=True))
        while True:
            if self.i >= len(text):
                raise self.fail(open_line, 'a double quote (") opened here is never closed')
            c = text[self.i]
            if c == '"':
                self.i += 1
                break
            if c == "\\" and self.i + 1 < len(text) and text[self.i + 1] in '"\\$`\n':
                if text[self.i + 1] == "\n":
                    self.line += 1
                else:
                    buf.append(text[self.i + 1])
                self.i += 2
            elif c in "$`":
                if buf:
                    segments.append(Lit("".join(buf), quoted=True))
                    buf.clear()
                segments.append(self._dollar() if c == "$" else self._backtick())
            else:
                if c == "\n":
                    self.line += 1
                buf.append(c)
                self.i += 1
        if buf:
            segments.append(Lit("".join(buf), quoted=True))

    def _dollar(self) -> Segment:
        text = self.text
        i = self.i
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if nxt == "(":
            return self._command_substitution()
        if nxt == "{":
            return self._braced()
        match = _NAME.match(text, i + 1)
        if match:
            self.i = match.end()
            return Var(match.group(0), text[i : match.end()])
        if nxt and nxt in SPECIAL_PARAM:
            self.i = i + 2
            return Var(nxt, text[i : i + 2])
        self.i = i + 1
        return Lit("$", quoted=False)

    def _command_substitution(self) -> Cmd:
        """At `$(` (or `<(`, `>(`): up to its matching `)`."""
        text = self.text
        i = self.i
        depth, j = 0, i + 1
        while j < len(text):
            if text[j] == "(":
                depth += 1
            elif text[j] == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if j >= len(text):
            raise self.fail(self.line, "a command substitution '$(' opened here never ends")
        self.line += text.count("\n", i, j)
        self.i = j + 1
        return Cmd(text[i : j + 1])

    def _braced(self) -> Segment:
        """At `${`: a variable (with its `:-` default), or an expansion not evaluated here."""
        text = self.text
        i = self.i
        end = text.find("}", i)
        if end < 0:
            raise self.fail(self.line, "a '${' opened here is never closed")
        body = text[i + 2 : end]
        self.i = end + 1
        raw = text[i : end + 1]
        name_match = _NAME.match(body) or re.match(r"[@*#?$!0-9]", body)
        if not name_match:
            return Cmd(raw)
        name, rest = name_match.group(0), body[name_match.end() :]
        if rest == "":
            return Var(name, raw)
        operator = re.match(r":?[-=?+]", rest)
        if operator is None:
            return Cmd(raw)  # ${X%…}, ${X/…}, ${X:1}: not something to evaluate here
        op, default = operator.group(0), rest[operator.end() :]
        if op.endswith("+") or "$" in default or "`" in default:
            return Cmd(raw)  # ${X:+alt} and nested expansions: only the running shell knows
        if op.endswith("?"):
            return Var(name, raw)  # ${X:?message}: X's value, or the script stops
        # ${X:-default} uses the default; ${X:=default} also assigns it to X.
        return Var(name, raw, default, assigns=op.endswith("="))

    def _backtick(self) -> Cmd:
        end = self.text.find("`", self.i + 1)
        if end < 0:
            raise self.fail(self.line, "a backtick (`) opened here is never closed")
        raw = self.text[self.i : end + 1]
        self.line += raw.count("\n")
        self.i = end + 1
        return Cmd(raw)
