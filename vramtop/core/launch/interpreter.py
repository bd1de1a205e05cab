"""The launch script's commands walked in order, as bash would (never run): variables, `cd`,
exports and blocks tracked, the vLLM command found, its values resolved, its secrets taken
out (`ParsedLaunch`), and every problem on the way kept with its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vramtop.core import secrets
from vramtop.core.launch import checks
from vramtop.core.launch.problems import Problem
from vramtop.core.launch.shell_commands import Command
from vramtop.core.launch.shell_lex import (
    Cmd,
    Lit,
    Segment,
    Var,
    Word,
)
from vramtop.core.launch.variables import ScriptVariables, Unresolved, Variable
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
HF_TOKEN_FLAG = "--hf-token"
# The secret flags a script may pass, and the variable each is read from when its value is
# written out in the script.
_SECRET_ENV = {vllm_args.API_KEY: secrets.VLLM_API_KEY, HF_TOKEN_FLAG: secrets.HF_TOKEN}
_SCRIPT_DIR = re.compile(r"""^\$\(\s*dirname\s+"?\$(0|\{0\}|\{BASH_SOURCE(\[0\])?\})"?\s*\)$""")


@dataclass
class _ApiKey:
    """What the vLLM command's `--api-key` said (nothing when it has none)."""

    env: str | None = None
    literal: bool = False


class Interpreter:
    def __init__(self, text: str, script_dir: str | None) -> None:
        self.text = text
        self.script_dir = script_dir
        self.vars = ScriptVariables()
        self.errors: list[Problem] = []
        self.result: ParsedLaunch | None = None
        self.blocks: list[tuple[str, int]] = []
        self.prelude: list[str] = []
        self.env: dict[str, str] = {}
        self.cwd: str | None = None
        self.warnings: list[Problem] = []
        self.api_key_literal = False
        self.hf_token_env: str | None = None

    def finish(self) -> ParsedLaunch:
        """The vLLM command with everything the script set around it (no errors left)."""
        result = self.result
        assert result is not None
        result.env = self.env
        result.prelude = self.prelude
        result.cwd = self.cwd
        result.api_key_in_script = result.api_key_in_script or self.api_key_literal
        if self.api_key_literal and result.api_key_env is None:
            result.api_key_env = secrets.VLLM_API_KEY
        result.hf_token_env = result.hf_token_env or self.hf_token_env
        result.warnings = sorted(self.warnings, key=lambda p: p.line or 0)
        return result

    # values

    def source_text(self, cmd: Command) -> str:
        return re.sub(r"\\\n[ \t]*", " ", self.text[cmd.start : cmd.end]).strip()

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
        inline: dict[str, Variable] = {}
        while words and (assign := self.vars.assign(words[0], cmd.line)):
            inline[assign[0]] = assign[1]
            words.pop(0)
        if not words:
            self.vars.update(inline)
            return
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
            return
        if head == "export":
            self._export(cmd, words[1:])
        elif head in _DECLARE:
            for word in words[1:]:
                if assign := self.vars.assign(word, cmd.line):
                    self.vars[assign[0]] = assign[1]
        elif head == "cd":
            self._cd(cmd, words[1:])
        else:
            self.prelude.append(self.source_text(cmd))

    # parts

    def _export(self, cmd: Command, args: list[Word]) -> None:
        shell_side = False
        for word in args:
            if word.literal and word.literal.startswith("-"):
                shell_side = True
                continue
            assign = self.vars.assign(word, cmd.line)
            if assign is None:
                name = word.literal or ""
                var = self.vars.get(name)
                if var is not None and var.value is not None:
                    self._set_env(name, var.value, cmd.line)
                else:
                    shell_side = True
                continue
            name, var = assign
            self.vars[name] = var
            rest_literal = all(isinstance(s, Lit) for s in word.segments)
            if var.value is not None and rest_literal:
                self._set_env(name, var.value, cmd.line)
            else:
                # Refers to the environment (PATH, LD_LIBRARY_PATH…): let the shell expand it.
                shell_side = True
                self.vars[name] = Variable(None, cmd.line, ", from the environment")
        if shell_side:
            self.prelude.append(self.source_text(cmd))

    def _set_env(self, name: str, value: str, line: int) -> None:
        """A variable for the server; one holding a secret is left to the user's shell."""
        if not secrets.is_secret_name(name):
            self.env[name] = value
            return
        if name == secrets.VLLM_API_KEY:
            self.api_key_literal = True
            what = "the API key"
        elif name == secrets.HF_TOKEN:
            self.hf_token_env = name
            what = "the Hugging Face token"
        else:
            what = "a secret"
        self.warnings.append(
            Problem(
                line,
                f"{what} is written in the script ({name}); vramtop does not store it: "
                f"export {name} in your shell before starting the server",
            )
        )

    def _cd(self, cmd: Command, args: list[Word]) -> None:
        if not args:
            raise Unresolved("`cd` without a directory (home) is not supported; name it")
        word = args[0]
        only = _only_segment(word)
        if isinstance(only, Cmd) and _SCRIPT_DIR.match(only.raw):
            if self.script_dir is None:
                raise Unresolved("`cd` to the script's directory, which is not known here")
            self.cwd = self.script_dir
            return
        target = self.vars.resolve(word)
        if self.cwd and not target.startswith(("/", "~")):
            target = self.cwd.rstrip("/") + "/" + target
        self.cwd = target

    def _vllm(self, cmd: Command, words: list[Word], inline: dict[str, Variable]) -> None:
        if self.result is not None:
            self.errors.append(
                Problem(
                    cmd.line,
                    f"a second vLLM command (the first is on line "
                    f"{self.result.line}); a profile runs one server",
                )
            )
            return
        notes = self._unwrap(cmd, words, inline)
        key, token = _ApiKey(), _ApiKey()
        argv = self._vllm_argv(cmd, words, {vllm_args.API_KEY: key, HF_TOKEN_FLAG: token}, notes)
        if vllm_args.launch_form(argv) is None:
            self.errors.append(checks.unknown_launch(cmd.line, argv))
            return
        errors, dropped = checks.plumbing(cmd)
        self.errors.extend(errors)
        notes.extend(dropped)
        for name, var in inline.items():
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

    def _unwrap(
        self, cmd: Command, words: list[Word], inline: dict[str, Variable]
    ) -> list[Problem]:
        """Drop `exec`, `nohup`, `env A=B`… from the front of `words` (in place); `env`'s
        assignments join `inline`. Returns the notes on what was dropped."""
        notes: list[Problem] = []
        while words and words[0].literal in checks.WRAPPERS:
            wrapper = words.pop(0).literal
            if wrapper == "nohup":
                notes.append(checks.nohup_dropped(cmd.line))
            while wrapper == "env" and words and (a := self.vars.assign(words[0], cmd.line)):
                inline[a[0]] = a[1]
                words.pop(0)
        return notes

    def _vllm_argv(
        self, cmd: Command, words: list[Word], keys: dict[str, _ApiKey], notes: list[Problem]
    ) -> list[str]:
        """The words resolved, less the secret flags (`--api-key`, `--hf-token`: noted in
        `keys`) and `$@`/`$*` (noted)."""
        argv: list[str] = []
        skip_next = False
        for index, word in enumerate(words):
            if skip_next:
                skip_next = False
                continue
            key_value = self._secret_value(word, words[index + 1 : index + 2])
            if key_value is not None:
                flag, value_word, skip_next = key_value
                key = keys[flag]
                key.env, key.literal = self._api_key(value_word, _SECRET_ENV[flag])
                continue
            only = _only_segment(word)
            if isinstance(only, Var) and only.name in ("@", "*"):
                notes.append(
                    Problem(
                        cmd.line,
                        f"{only.raw} (the script's own "
                        "arguments) dropped: a profile runs without any",
                    )
                )
                continue
            try:
                argv.append(self.vars.resolve(word))
            except Unresolved as exc:
                self.errors.append(Problem(word.line, exc.message))
        return argv

    @staticmethod
    def _secret_value(word: Word, following: list[Word]) -> tuple[str, Word | None, bool] | None:
        """For `--api-key V` / `--hf-token=V`: (the flag, the value's word, whether it is the
        next word)."""
        first = word.segments[0] if word.segments else None
        if not isinstance(first, Lit) or first.quoted or not first.text.startswith("--"):
            return None
        flag, eq, rest = first.text.partition("=")
        flag = vllm_args.canonical_flag(flag)
        if flag not in _SECRET_ENV:
            return None
        if eq:
            return flag, Word([Lit(rest, False), *word.segments[1:]], word.line, 0, 0), False
        return (flag, following[0], True) if following else (flag, None, False)

    def _api_key(self, value_word: Word | None, default_env: str) -> tuple[str, bool]:
        """Drop the secret from the argv: (the variable to take it from, whether it was a
        value)."""
        if value_word is not None:
            segs = [s for s in value_word.segments if not (isinstance(s, Lit) and not s.text)]
            if len(segs) == 1 and isinstance(segs[0], Var):
                name = segs[0].name
                var = self.vars.get(name)
                if var is None or var.value is None:
                    return name, False  # taken from the environment at launch: fine
        return default_env, True


def _only_segment(word: Word) -> Segment | None:
    """The word's single meaningful part (`"$@"` is an empty quote plus `$@`), if it has one."""
    parts = [s for s in word.segments if not (isinstance(s, Lit) and not s.text)]
    return parts[0] if len(parts) == 1 else None
