"""The launch script's commands walked in order, as bash would (never run): variables, `cd`,
exports and blocks tracked, the vLLM command found, its values resolved, its secrets taken
out (`ParsedLaunch`), and every problem on the way kept with its line. The shell lines kept
for the profile gather in a `Prelude`, the keys met on the way in `ScriptSecrets`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vramtop.core import secrets
from vramtop.core.launch import checks
from vramtop.core.launch.prelude import Prelude
from vramtop.core.launch.problems import Problem
from vramtop.core.launch.script_secrets import ScriptSecrets
from vramtop.core.launch.shell_commands import Command
from vramtop.core.launch.shell_lex import Cmd, Lit, Var, Word
from vramtop.core.launch.variables import ScriptVariables, Unresolved, Variable
from vramtop.core.launch.vllm_words import HF_TOKEN_FLAG, ApiKey, VllmWords
from vramtop.core.launch.written_keys import (
    holds_secret,
    only_segment,
)
from vramtop.core.vllm import args as vllm_args


@dataclass
class ParsedLaunch:
    argv: list[str]
    """vLLM's command line, values resolved, `--api-key` removed."""
    env: dict[str, str] = field(default_factory=dict)
    prelude: list[str] = field(default_factory=list)
    cwd: str | None = None
    line: int = 0
    """Where the vLLM command starts."""
    api_key_env: str | None = None
    """The variable the API key should come from, when the script sets or passes one."""
    api_key_in_script: bool = False
    """The script writes a key value itself (on the command line or in an export)."""
    hf_token_env: str | None = None
    """The variable the Hugging Face token should come from, when the script sets one."""
    warnings: list[Problem] = field(default_factory=list)

    @property
    def prelude_text(self) -> str | None:
        return " && ".join(self.prelude) if self.prelude else None


_DECLARE = {"declare", "typeset", "readonly", "local"}
_SCRIPT_DIR = re.compile(r"""^\$\(\s*dirname\s+"?\$(0|\{0\}|\{BASH_SOURCE(\[0\])?\})"?\s*\)$""")


class Interpreter:
    """Walks the commands of `run`; the vLLM command is `result`, the problems that stop the
    import `errors`, and `finish` gives the launch with what the script set around it."""

    def __init__(self, text: str, script_dir: str | None) -> None:
        self.script_dir = script_dir
        self.vars = ScriptVariables()
        self.errors: list[Problem] = []
        self.result: ParsedLaunch | None = None
        self.blocks: list[tuple[str, int]] = []
        self.env: dict[str, str] = {}
        self.cwd: str | None = None
        self.warnings: list[Problem] = []
        self.prelude = Prelude(text, self.errors)
        self.secrets = ScriptSecrets(self.vars, self.warnings)
        self.exported: set[str] = set()
        """Names the script exported: an assignment to one later exports its value too."""

    def finish(self) -> ParsedLaunch:
        """The vLLM command with everything the script set around it (no errors left)."""
        result = self.result
        assert result is not None
        result.env = self.env
        result.prelude = self.prelude.lines
        result.cwd = self.cwd
        api_key, hf_token = self.secrets.api_key, self.secrets.hf_token
        if result.api_key_env is None and api_key is not None:
            result.api_key_env, written = api_key
            result.api_key_in_script = result.api_key_in_script or written
        if result.hf_token_env is None and hf_token is not None:
            result.hf_token_env = hf_token[0]
        warnings = sorted(self.warnings, key=lambda p: p.line or 0)
        result.warnings = [self.secrets.redact(p) for p in warnings]
        return result

    # values

    def _is_vllm_like(self, cmd: Command) -> bool:
        return checks.is_vllm_like(cmd, self.vars.resolve_or_none)

    # commands

    def run(self, commands: list[Command]) -> None:
        for cmd in commands:
            try:
                self._one(cmd)
            except Unresolved as exc:
                self.errors.append(Problem(cmd.line, exc.message))

    def _one(self, cmd: Command) -> None:
        words = cmd.words
        head = words[0].literal if words else None
        kind = checks.opened_block(cmd)
        if kind is not None:
            self.blocks.append((checks.block_name(kind), cmd.line))
            if kind == "function":
                self.errors.append(checks.function_unsupported(cmd.line))
            self._block_body(cmd, words[1:] if head in ("then", "do") else [])
            return
        if head in checks.BLOCK_CONTINUE:
            self._block_body(cmd, words[1:])
            return
        if head in checks.BLOCK_CLOSE:
            if self.blocks:
                self.blocks.pop()
            return
        if self.blocks or cmd.subshell:
            self._inside_block(cmd)
            return
        self._simple(cmd)

    def _block_body(self, cmd: Command, rest: list[Word]) -> None:
        if rest:
            inner = Command(rest, cmd.redirects, cmd.line, rest[0].start, cmd.end)
            self._inside_block(inner)

    def _inside_block(self, cmd: Command) -> None:
        if self._is_vllm_like(cmd):
            self.errors.append(checks.vllm_inside_block(cmd, self.blocks))
        elif self.result is None and not self.errors:
            self.errors.append(checks.block_in_prelude(cmd, self.blocks))

    def _simple(self, cmd: Command) -> None:
        words = list(cmd.words)
        inline: dict[str, tuple[Variable, Word]] = {}
        while words and (assign := self.vars.assign(words[0], cmd.line)):
            inline[assign[0]] = (assign[1], words[0])
            words.pop(0)
        if not words:
            if self.prelude.allexport:  # under `set -a` an assignment is an export
                self._export(cmd, list(cmd.words))
                return
            for name, (var, word) in inline.items():
                if name in self.exported:  # exported before: the new value is exported
                    self._export(cmd, [word])
                else:
                    self._assign(name, var, word)
            return
        element = _array_element(words[0])
        if element is not None:
            raise Unresolved(_array_unsupported(element))
        if self._is_vllm_like(cmd):
            self._vllm(cmd, words, inline)
            return
        if self.result is not None:
            if words[0].literal not in ("wait", "exit"):
                self.warnings.append(
                    Problem(cmd.line, "ignored: commands after the vLLM command do not run")
                )
            return
        head = words[0].literal
        if head == "set":
            self.prelude.set_options(words[1:])
            return
        if head in _ASSIGNING:
            for word in words[1:]:
                if (element := _array_element(word)) is not None:
                    raise Unresolved(_array_unsupported(element))
        if head in _DECLARE and _has_option(words[1:], "n"):
            raise Unresolved(
                f"`{head} -n` (a name for another variable) is not supported in a launch "
                "script: assign the variable itself"
            )
        if head in (":", "true") and len(words) > 1 and all(map(_assigns_default, words[1:])):
            self._defaults(cmd, words[1:])
        elif head == "export":
            self._export(cmd, words[1:])
        elif head in _DECLARE and _exports(words[1:]):
            # `declare -x NAME=…` exports as `export` does.
            self._export(cmd, [w for w in words[1:] if not (w.literal or "").startswith("-")])
        elif head in _DECLARE:
            # `readonly`, `local`, `declare` without -x: an assignment, as `NAME=…` alone.
            for word in words[1:]:
                if assign := self.vars.assign(word, cmd.line):
                    self._assign(assign[0], assign[1], word)
        elif head == "cd":
            self._cd(cmd, words[1:])
        else:
            self.prelude.add_command(cmd)

    def _assign(self, name: str, var: Variable, word: Word) -> None:
        """`NAME=…` that exports nothing: known to the script's later words, stored nowhere
        (a key among them is kept out of every message)."""
        self.vars[name] = var
        if var.value is not None and holds_secret(name, _value_word(word)):
            self.secrets.values.add(var.value)

    def _defaults(self, cmd: Command, args: list[Word]) -> None:
        """`: ${NAME:=value}` (or `true "${NAME=value}"`): NAME gets the value where the
        script has not set it (its own environment's value otherwise). A key given so is
        not stored: the line is dropped and the person told to export NAME; other defaults
        stay a line of the prelude and are known to the vLLM command's words."""
        kept: list[Word] = []
        for word in args:
            seg = next(s for s in word.segments if isinstance(s, Var))
            if not secrets.holds_secret(seg.name, seg.default or ""):
                kept.append(word)
                self.vars.resolve_or_none(word)  # NAME holds its default from here on
                continue
            self.secrets.default(seg, cmd.line)
        if kept:
            self.prelude.add_words(cmd.line, ":", kept)

    # parts

    def _export(self, cmd: Command, args: list[Word]) -> None:
        """`export A=1 B="$X" VLLM_API_KEY=…`: literal values → env; values the shell expands
        → an export line in the prelude; keys → neither (where they come from is noted)."""
        shell_side: list[Word] = []
        for word in args:
            if word.literal and word.literal.startswith("-"):
                shell_side.append(word)
                continue
            assign = self.vars.assign(word, cmd.line)
            if assign is None:
                name = word.literal or ""
                self.exported.add(name)
                var = self.vars.get(name)
                if var is not None and var.secret is not None:
                    self.secrets.note(name, var.secret, cmd.line)
                elif var is not None and var.value is not None:
                    self._set_env(name, var.value, cmd.line)
                else:
                    shell_side.append(word)
                continue
            name, var = assign
            self.exported.add(name)
            value = _value_word(word)
            if holds_secret(name, value):
                if not self.secrets.assignment(name, value, cmd.line):
                    shell_side.append(word)  # from a command: the shell runs it at launch
                continue
            self.vars[name] = var
            rest_literal = all(isinstance(s, Lit) for s in word.segments)
            if var.value is not None and rest_literal:
                self._set_env(name, var.value, cmd.line)
            else:
                # Refers to the environment (PATH, LD_LIBRARY_PATH…): let the shell expand it.
                shell_side.append(word)
                self.vars[name] = Variable(None, cmd.line, ", from the environment")
        if any(not (w.literal or "").startswith("-") for w in shell_side):
            self.prelude.add_words(cmd.line, "export", shell_side)

    def _set_env(self, name: str, value: str, line: int) -> None:
        """A variable for the server; one holding a secret is left to the user's shell."""
        if secrets.holds_secret(name, value):
            self.secrets.written(name, value, line)
        else:
            self.env[name] = value

    def _cd(self, cmd: Command, args: list[Word]) -> None:
        if not args:
            raise Unresolved("`cd` without a directory (home) is not supported; name it")
        word = args[0]
        only = only_segment(word)
        if isinstance(only, Cmd) and _SCRIPT_DIR.match(only.raw):
            if self.script_dir is None:
                raise Unresolved("`cd` to the script's directory, which is not known here")
            self.cwd = self.script_dir
            return
        target = self.vars.resolve(word)
        if self.cwd and not target.startswith(("/", "~")):
            target = self.cwd.rstrip("/") + "/" + target
        self.cwd = target

    def _vllm(
        self, cmd: Command, words: list[Word], inline: dict[str, tuple[Variable, Word]]
    ) -> None:
        if self.result is not None:
            self.errors.append(
                Problem(
                    cmd.line,
                    f"a second vLLM command (the first is on line "
                    f"{self.result.line}); a profile runs one server",
                )
            )
            return
        words_of = VllmWords(self.vars, self.errors, self.secrets.values)
        notes = words_of.unwrap(cmd, words, inline)
        key, token = ApiKey(), ApiKey()
        argv = words_of.argv(cmd, words, {vllm_args.API_KEY: key, HF_TOKEN_FLAG: token}, notes)
        if vllm_args.launch_form(argv) is None:
            self.errors.append(checks.unknown_launch(cmd.line, argv))
            return
        errors, dropped = checks.plumbing(cmd)
        self.errors.extend(errors)
        notes.extend(dropped)
        for name, (var, word) in inline.items():
            value = _value_word(word)
            if holds_secret(name, value) and self.secrets.assignment(name, value, cmd.line):
                continue
            if var.value is None:
                self.errors.append(Problem(cmd.line, f"inline variable {name}: {var.unresolved}"))
            else:
                self._set_env(name, var.value, cmd.line)
        if token.literal:
            notes.append(
                Problem(
                    cmd.line,
                    "the Hugging Face token is written in the script; vramtop does not store "
                    f"it: export {secrets.HF_TOKEN} in your shell before starting the server",
                )
            )
        self.result = ParsedLaunch(
            argv=argv,
            line=cmd.line,
            api_key_env=key.env,
            api_key_in_script=key.literal,
            hf_token_env=token.env,
        )
        self.warnings.extend(notes)


def _value_word(word: Word) -> Word:
    """The value of an assignment word `NAME=value`, as a word of its own."""
    first = word.segments[0]
    assert isinstance(first, Lit)
    rest = first.text.partition("=")[2]
    return Word([Lit(rest, False), *word.segments[1:]], word.line, word.start, word.end)


def _exports(args: list[Word]) -> bool:
    """Whether `declare`/`typeset`'s options include `-x` (export)."""
    return any((w.literal or "").startswith("-") and "x" in (w.literal or "")[1:] for w in args)


_ASSIGNING = {"export", *_DECLARE}
_ARRAY_ELEMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[[^\]]*\]\+?=")


def _array_element(word: Word) -> str | None:
    """`NAME[…]=…`: the array's name (an assignment bash makes and vramtop does not follow)."""
    first = word.segments[0] if word.segments else None
    if not isinstance(first, Lit) or first.quoted:
        return None
    match = _ARRAY_ELEMENT.match(first.text)
    return match.group(1) if match else None


def _array_unsupported(name: str) -> str:
    return (
        f"an array ({name}[…]=…) is not supported in a launch script: give each value a "
        "variable of its own"
    )


def _has_option(args: list[Word], letter: str) -> bool:
    """Whether `declare`-style options (`-n`, `-rn`) include `letter`."""
    return any((w.literal or "").startswith("-") and letter in (w.literal or "")[1:] for w in args)


def _assigns_default(word: Word) -> bool:
    """The word is `${NAME:=value}` or `${NAME=value}` alone (quoted or not)."""
    only = only_segment(word)
    return isinstance(only, Var) and only.assigns
