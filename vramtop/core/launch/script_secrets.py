"""The keys a launch script writes or takes from its environment, as its walk (`interpreter`)
meets them: none is stored in the profile, every one is masked in the messages vramtop
prints, and where the server takes its API key and Hugging Face token from instead is kept.
"""

from __future__ import annotations

from vramtop.core import secrets
from vramtop.core.launch.problems import Problem
from vramtop.core.launch.shell_lex import SPECIAL_PARAM, Cmd, Lit, Var, Word
from vramtop.core.launch.variables import ScriptVariables, Variable
from vramtop.core.launch.written_keys import echoes_literal

# Where a key comes from at launch: (the variable, whether the script writes the value itself).
Source = tuple[str, bool]
_NOT_STORED = ", a key vramtop does not store"


class ScriptSecrets:
    """The walk's keys: `values` (every key seen, masked by `redact`), where the API key and
    the token come from (`api_key`, `hf_token`), and a note for each key written in the
    script (to `warnings`, the walk's own list). `vars` are the walk's variables: a key's
    variable is known to exist there, with no value."""

    def __init__(self, vars: ScriptVariables, warnings: list[Problem]) -> None:
        self.vars = vars
        self.warnings = warnings
        self.values: set[str] = set()
        """Every key the script writes, so that no message vramtop prints repeats it."""
        # Where the server's key and token come from, when an assignment in the script (not
        # the vLLM command's own flags) sets them.
        self.api_key: Source | None = None
        self.hf_token: Source | None = None
        self._noted: set[str] = set()  # the keys already said to be written in the script

    def redact(self, problem: Problem) -> Problem:
        """`problem` with every key the script writes masked, in whatever form it is quoted."""
        text = secrets.mask_line(problem.message)
        for value in sorted(self.values, key=len, reverse=True):
            if len(value) >= 3:
                text = text.replace(value, secrets.MASK)
        return Problem(problem.line, text)

    def assignment(self, name: str, value: Word, line: int) -> bool:
        """`NAME=…` where NAME holds a key (or the value is one): never stored. Notes where
        the server takes it from at launch; False when the value comes from a command (which
        only the running shell can do)."""
        parts = [s for s in value.segments if not (isinstance(s, Lit) and not s.text)]
        only = parts[0] if len(parts) == 1 else None
        self.values.update(key_texts(value, self.vars))
        if isinstance(only, Cmd) and not echoes_literal(only):
            self.vars[name] = Variable(None, line, " from a command")
            return False
        source: Source
        known = self.vars.get(only.name) if isinstance(only, Var) else None
        if isinstance(only, Var) and only.name not in SPECIAL_PARAM:
            if known is not None and known.secret is not None:
                source = known.secret
            elif known is None or known.value is None:
                # From the environment (`$MY_KEY`); a default beside it is a key written.
                source = (only.name, only.default is not None)
            else:
                source = (name, True)
        else:
            source = (name, True)
        self._withhold(name, source, line)
        return True

    def written(self, name: str, value: str, line: int) -> None:
        """`NAME` is given the key `value`, written in the script: the server takes it from
        the person's own `NAME` at launch."""
        self.values.add(value)
        self._withhold(name, (name, True), line)

    def default(self, seg: Var, line: int) -> None:
        """`: ${NAME:=key}`: the key is masked, and NAME, where the script has not set it
        before (the default is never used otherwise), is taken from the person's shell."""
        self.values.update((seg.default or "", seg.raw))
        if seg.name not in self.vars:
            self._withhold(seg.name, (seg.name, True), line)

    def note(self, name: str, source: Source, line: int) -> None:
        """The exported key `name` is taken from `source` at launch (and said so)."""
        env, written = source
        if name == secrets.VLLM_API_KEY:
            self.api_key = source
            what = "the API key"
        elif name == secrets.HF_TOKEN:
            self.hf_token = source
            what = "the Hugging Face token"
        else:
            what = "a secret"
        if written and name not in self._noted:
            self._noted.add(name)
            self.warnings.append(
                Problem(
                    line,
                    f"{what} is written in the script ({name}); vramtop does not store it: "
                    f"export {env} in your shell before starting the server",
                )
            )

    def _withhold(self, name: str, source: Source, line: int) -> None:
        """NAME holds a key taken from `source` at launch: known to the script's later words,
        never stored, and noted."""
        self.vars[name] = Variable(None, line, _NOT_STORED, secret=source)
        self.note(name, source, line)


def key_texts(value: Word, vars: ScriptVariables) -> set[str]:
    """The texts of a value word that holds a key, each of which a message must not repeat:
    a command's text, a default and the expansion around it, and the value itself where the
    script's variables give it."""
    out: set[str] = set()
    for seg in value.segments:
        if isinstance(seg, Cmd):
            out.add(seg.raw)
        elif isinstance(seg, Var) and seg.default:
            out.update((seg.default, seg.raw))
    resolved = vars.resolve_or_none(value)
    if resolved:
        out.add(resolved)
    return out
