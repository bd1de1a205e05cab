"""The vLLM command's own words, as the launch script's walk (`interpreter`) finds them:
the wrappers in front of it (`exec`, `nohup`, `env A=B`) dropped, its words resolved, and
its secret flags (`--api-key`, `--hf-token`) taken out, with where the server takes each key
from instead. Every key seen is kept (`secret_values`) so that no message repeats it.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramtop.core import secrets
from vramtop.core.launch import checks
from vramtop.core.launch.problems import Problem
from vramtop.core.launch.script_secrets import key_texts
from vramtop.core.launch.shell_commands import Command
from vramtop.core.launch.shell_lex import SPECIAL_PARAM, Lit, Var, Word
from vramtop.core.launch.variables import ScriptVariables, Unresolved, Variable
from vramtop.core.launch.written_keys import literal_view, names_secret, only_segment
from vramtop.core.vllm import args as vllm_args

HF_TOKEN_FLAG = "--hf-token"
# The secret flags a script may pass, and the variable each is read from when its value is
# written out in the script.
_SECRET_ENV = {vllm_args.API_KEY: secrets.VLLM_API_KEY, HF_TOKEN_FLAG: secrets.HF_TOKEN}


@dataclass
class ApiKey:
    """What the vLLM command's `--api-key` said (nothing when it has none)."""

    env: str | None = None
    literal: bool = False


class VllmWords:
    """Reads the vLLM command's words with the script's variables (`vars`); each problem
    goes to `errors`, each key seen to `secret_values` (both the walk's own)."""

    def __init__(
        self, vars: ScriptVariables, errors: list[Problem], secret_values: set[str]
    ) -> None:
        self.vars = vars
        self.errors = errors
        self.secret_values = secret_values

    def unwrap(
        self, cmd: Command, words: list[Word], inline: dict[str, tuple[Variable, Word]]
    ) -> list[Problem]:
        """Drop `exec`, `nohup`, `env A=B`… from the front of `words` (in place); `env`'s
        assignments join `inline`. Returns the notes on what was dropped."""
        notes: list[Problem] = []
        while words and words[0].literal in checks.WRAPPERS:
            wrapper = words.pop(0).literal
            if wrapper == "nohup":
                notes.append(checks.nohup_dropped(cmd.line))
            while wrapper == "env" and words and (a := self.vars.assign(words[0], cmd.line)):
                inline[a[0]] = (a[1], words.pop(0))
        return notes

    def argv(
        self, cmd: Command, words: list[Word], keys: dict[str, ApiKey], notes: list[Problem]
    ) -> list[str]:
        """The words resolved, less the secret flags (`--api-key`, `--hf-token`: noted in
        `keys`) and `$@`/`$*` (noted)."""
        argv: list[str] = []
        skip: set[int] = set()
        for index, word in enumerate(words):
            if index in skip:
                continue
            key_value = self._secret_value(word, words[index + 1 : index + 2])
            if key_value is not None:
                flag, value_word, next_word = key_value
                key = keys[flag]
                key.env, key.literal = self._api_key(value_word, _SECRET_ENV[flag])
                if next_word:
                    skip.add(index + 1)
                    if flag == vllm_args.API_KEY:
                        # vLLM's --api-key takes several keys (`--api-key k1 k2`): each is a
                        # key, none a positional word to keep.
                        skip |= self._more_keys(cmd, words, index + 2)
                continue
            only = only_segment(word)
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
                arg = self.vars.resolve(word)
            except Unresolved as exc:
                self.errors.append(Problem(word.line, exc.message))
                continue
            if secrets.written_secret(arg) or names_secret(word):
                self.secret_values.add(arg)
                self.errors.append(
                    Problem(
                        word.line,
                        "a word of the vLLM command holds a key or token, and vramtop never "
                        "stores one: export the API key as VLLM_API_KEY (vLLM reads it) and "
                        "the Hugging Face token as HF_TOKEN",
                    )
                )
                continue
            argv.append(arg)
        return argv

    def _more_keys(self, cmd: Command, words: list[Word], start: int) -> set[int]:
        """The words after `--api-key`'s first value up to the next flag: further keys. They
        are never kept; vLLM reads one key from VLLM_API_KEY, so the script is refused."""
        more: set[int] = set()
        for index in range(start, len(words)):
            try:
                text = self.vars.resolve(words[index])
            except Unresolved:
                text = literal_view(words[index])
            if text.startswith("-"):
                break
            more.add(index)
            self.secret_values.add(text)
        if more:
            self.errors.append(
                Problem(
                    cmd.line,
                    "several keys follow the API-key flag: vramtop hands the server one key, as "
                    "VLLM_API_KEY; keep one key, exported in the variable the profile names",
                )
            )
        return more

    @staticmethod
    def _secret_value(word: Word, following: list[Word]) -> tuple[str, Word | None, bool] | None:
        """For `--api-key V` / `--hf-token=V` (quoted or not: `"--api-key=V"`): (the flag,
        the value's word, whether it is the next word)."""
        head = ""
        for index, seg in enumerate(word.segments):
            if not isinstance(seg, Lit):
                break
            flag, eq, rest = seg.text.partition("=")
            head += flag
            if eq:
                tail = [Lit(rest, seg.quoted), *word.segments[index + 1 :]]
                value: Word | None = Word(tail, word.line, 0, 0)
                break
        else:
            value = None
            eq = ""
        if not head.startswith("--"):
            return None
        flag = vllm_args.canonical_flag(head)
        if flag not in _SECRET_ENV:
            return None
        if eq:
            return flag, value, False
        if len(head) != len(word.raw_text):
            return None  # `--api-key$X`: not the flag vLLM reads
        return (flag, following[0], True) if following else (flag, None, False)

    def _api_key(self, value_word: Word | None, default_env: str) -> tuple[str, bool]:
        """Drop the secret from the argv: (the variable to take it from, whether it was a
        value)."""
        if value_word is None:
            return default_env, True
        self.secret_values.update(key_texts(value_word, self.vars))
        segs = [s for s in value_word.segments if not (isinstance(s, Lit) and not s.text)]
        if len(segs) == 1 and isinstance(segs[0], Var) and segs[0].name not in SPECIAL_PARAM:
            name = segs[0].name
            var = self.vars.get(name)
            if var is not None and var.secret is not None:
                return var.secret
            if var is None or var.value is None:
                # Taken from the environment at launch: fine (a default beside it is a key
                # written in the script).
                return name, segs[0].default is not None
            if secrets.is_secret_name(name):
                return name, True
        return default_env, True
