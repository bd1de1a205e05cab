"""A profile's prelude as a launch script's walk (`interpreter`) gathers it: the shell lines
run before the server, each as the script writes it, in the script's order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from vramtop.core.launch.problems import Problem
from vramtop.core.launch.shell_commands import Command
from vramtop.core.launch.shell_lex import Word
from vramtop.core.launch.written_keys import writes_key

_CONTINUED = re.compile(r"\\\n[ \t]*")  # a line continued with a backslash


class Prelude:
    """The lines so far (`lines`), taken from the script's `text`. A line that writes a key
    is refused (to `errors`, the walk's own list): the prelude is stored in the profile, and
    a key never is. The script's `set -a` is followed (`allexport`) and written where a line
    it covers needs it."""

    def __init__(self, text: str, errors: list[Problem]) -> None:
        self.text = text
        self.errors = errors
        self.lines: list[str] = []
        self.allexport = False  # `set -a`: every assignment from here on is exported
        self._allexport_written = False  # the prelude has its own `set -a` on

    def add_command(self, cmd: Command) -> None:
        """`cmd` as the script writes it, checked with its inline assignments and its
        redirects' words: all are stored."""
        text = _CONTINUED.sub(" ", self.text[cmd.start : cmd.end]).strip()
        self._add(cmd.line, text, cmd.words, cmd.targets)

    def add_words(self, line: int, head: str, words: list[Word]) -> None:
        """`head` followed by `words` as the script writes them (`export A="$X"`)."""
        text = " ".join(_CONTINUED.sub("", self.text[w.start : w.end]) for w in words)
        self._add(line, f"{head} {text}", words)

    def set_options(self, args: list[Word]) -> None:
        """`set -a` / `set -o allexport` (and their `+` forms) are followed; the shell's other
        options are dropped (the prelude's `&&` chain already stops on a failure)."""
        words = [w.literal or "" for w in args]
        for index, flag in enumerate(words):
            if flag in ("-o", "+o"):
                if words[index + 1 : index + 2] == ["allexport"]:
                    self._allexport(flag == "-o")
            elif flag[:1] in "-+" and not flag.startswith("--") and "a" in flag[1:]:
                self._allexport(flag.startswith("-"))

    def _allexport(self, on: bool) -> None:
        self.allexport = on
        if not on and self._allexport_written:
            self.lines.append("set +a")
            self._allexport_written = False

    def _add(
        self, line: int, text: str, words: list[Word], targets: Sequence[tuple[str, Word]] = ()
    ) -> None:
        if writes_key(words, targets):
            self.errors.append(
                Problem(
                    line,
                    "this command writes a key or token into the script, and vramtop never "
                    "stores one: export it in your shell and refer to it by its variable "
                    '(for example "$HF_TOKEN")',
                )
            )
            return
        if self.allexport and not self._allexport_written:
            self.lines.append("set -a")  # what it sources is exported, as in the script
            self._allexport_written = True
        self.lines.append(text)
