"""Tokens → simple commands, each with its redirects, pipe ends, `&` and connector.

Only as much grammar as a launch script needs: a command ends at a newline, `;`, `&&`, `||`,
`&` or `)`; a pipe links two commands; `( … )` marks the commands inside as a subshell; and
`NAME ()` is kept as a word so a function definition can be recognised (and refused).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vramtop.core.launch.shell_lex import Lit, Op, Token, Word


@dataclass
class Command:
    words: list[Word] = field(default_factory=list)
    redirects: list[tuple[str, str]] = field(default_factory=list)
    line: int = 0
    start: int = 0
    end: int = 0
    piped_in: bool = False
    pipe_to: Command | None = None
    background: bool = False
    connector: str = ""  # the operator that came before it: "&&", "||", ";" or newline
    subshell: bool = False
    targets: list[tuple[str, Word]] = field(default_factory=list)
    """Each redirect with a target word: (its operator, the word), a here-string's text among
    them."""


def split_commands(tokens: list[Token]) -> list[Command]:
    return _Splitter(tokens).commands()


class _Splitter:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.out: list[Command] = []
        self.current = Command()
        self.connector = "\n"
        self.subshell_depth = 0
        self.i = 0

    def commands(self) -> list[Command]:
        tokens = self.tokens
        while self.i < len(tokens):
            tok = tokens[self.i]
            if isinstance(tok, Word):
                self._word(tok)
            else:
                self._operator(tok)
            self.i += 1
        self._finish()
        return self.out

    def _finish(self) -> Command:
        done = self.current
        if done.words or done.redirects:
            self.out.append(done)
        self.current = Command()
        return done

    def _begin(self, tok: Token) -> None:
        """The first token of a command fixes where it starts and what came before it."""
        current = self.current
        if not current.words and not current.redirects:
            current.line, current.start, current.connector = tok.line, tok.start, self.connector
            if isinstance(tok, Word):
                current.subshell = self.subshell_depth > 0

    def _word(self, tok: Word) -> None:
        self._begin(tok)
        self.current.words.append(tok)
        self.current.end = tok.end

    def _operator(self, tok: Op) -> None:
        if tok.text in ("\n", ";", "&&", "||", ";;"):
            self._finish()
            self.connector = tok.text
        elif tok.text == "&":
            self.current.background = True
            self._finish()
            self.connector = "&"
        elif tok.text == "|":
            done = self._finish()
            self.current.piped_in = True
            self.current.line = tok.line
            done.pipe_to = self.current
        elif tok.text == "(":
            self._open_paren(tok)
        elif tok.text == ")":
            self.subshell_depth = max(0, self.subshell_depth - 1)
            self._finish()
        else:
            self._redirect(tok)

    def _open_paren(self, tok: Op) -> None:
        if self.current.words:  # NAME () — a function definition
            self.current.words.append(Word([Lit("()", False)], tok.line, tok.start, tok.end))
            nxt = self.tokens[self.i + 1] if self.i + 1 < len(self.tokens) else None
            if isinstance(nxt, Op) and nxt.text == ")":
                self.i += 1
            return
        self.subshell_depth += 1

    def _redirect(self, tok: Op) -> None:
        """Its target is the next word (unless it is `>&N`-style)."""
        target = ""
        nxt = self.tokens[self.i + 1] if self.i + 1 < len(self.tokens) else None
        if isinstance(nxt, Word):
            target = nxt.raw_text
            self.current.end = nxt.end
            self.current.targets.append((tok.text, nxt))
            self.i += 1
        self._begin(tok)
        self.current.redirects.append((tok.text, target))
