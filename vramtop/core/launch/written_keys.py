"""Which shell forms write a key into a launch script (or a profile's prelude), judged on the
words as the script writes them: the keys vramtop would store if it kept those words.

Pure: words in, yes or no out. `interpreter` refuses or drops what these find; `lint` warns
about a profile's prelude that holds one.
"""

from __future__ import annotations

from collections.abc import Sequence

from vramtop.core import secrets
from vramtop.core.launch.shell_commands import split_commands
from vramtop.core.launch.shell_lex import Cmd, Lit, Segment, ShellSyntaxError, Var, Word, tokenize

# Commands that set the variables they name from their input (a here-string's text).
_READERS = {"read", "mapfile", "readarray"}
# How deep `$(…)` inside `$(…)` is looked into for a key; past it, its text as a whole.
_MAX_NESTING = 16


def only_segment(word: Word) -> Segment | None:
    """The word's single meaningful part (`"$@"` is an empty quote plus `$@`), if it has one."""
    parts = [s for s in word.segments if not (isinstance(s, Lit) and not s.text)]
    return parts[0] if len(parts) == 1 else None


def literal_view(word: Word) -> str:
    """The text the script itself writes in `word`: its literal parts and the defaults of
    its expansions; what only the running shell knows reads as the mask (a variable's value,
    a command's output), so that a key is found where one is written, never where a
    variable is named."""
    out = []
    for seg in word.segments:
        if isinstance(seg, Lit):
            out.append(seg.text)
        elif isinstance(seg, Var) and seg.default is not None:
            out.append(seg.default)
        else:
            out.append(secrets.MASK)
    return "".join(out)


def sets_key(words: list[Word], targets: Sequence[tuple[str, Word]] = ()) -> bool:
    """`printf -v VLLM_API_KEY 'sk-…'`, `read HF_TOKEN <<< hf_…`: a builtin that assigns a
    secret-named variable a value written in the script (a value the shell reads at launch,
    from a file or a command, is not written there)."""
    texts = [w.literal for w in words]
    if texts[:1] == ["printf"] and texts[1:2] == ["-v"] and len(texts) >= 4 and texts[2]:
        return secrets.is_secret_name(texts[2]) and all(t is not None for t in texts[3:])
    if texts[:1] and texts[0] in _READERS:
        names = [t for t in texts[1:] if t and not t.startswith("-")]
        given = [w for op, w in targets if op == "<<<" or (op == "<" and _only_cmd(w))]
        return any(map(secrets.is_secret_name, names)) and any(map(_given_in_script, given))
    return False


def _only_cmd(word: Word) -> bool:
    return isinstance(only_segment(word), Cmd)


def holds_secret(name: str, value: Word) -> bool:
    """Whether `NAME=value` sets a key: by its name, or by what the value writes (a key's
    form, or a secret-named variable's default: `X=${VLLM_API_KEY:-sk-…}`)."""
    return secrets.holds_secret(name, literal_view(value)) or secret_default(value)


def secret_default(word: Word) -> bool:
    """The word writes a key as a default (`${HF_TOKEN:-hf_…}`, `${X:=Bearer …}`)."""
    return any(
        isinstance(seg, Var) and seg.default and secrets.holds_secret(seg.name, seg.default)
        for seg in word.segments
    )


def writes_key(words: list[Word], targets: Sequence[tuple[str, Word]], depth: int = 0) -> bool:
    """Whether a command, stored as the script writes it, would store a key: a key in one of
    the forms `secrets` knows (`NAME=…`, `--token …`, `Bearer …`) in its words or its
    redirects' (a here-string), a secret-named variable's default (`${HF_TOKEN:-hf_…}`,
    `echo ${KEY:=…}`), a builtin that assigns a secret-named variable a value written here
    (`printf -v`, `read`), or any of these inside a `$(…)`, `<(…)` or backquotes."""
    every = [*words, *(word for _, word in targets)]
    if secrets.written_secret(" ".join(literal_view(w) for w in every)):
        return True
    if sets_key(words, targets):
        return True
    if any(map(secret_default, every)):
        return True
    for word in every:
        for seg in word.segments:
            script = seg.script if isinstance(seg, Cmd) else None
            if script is not None and _script_writes_key(script, depth + 1):
                return True
    return False


def _script_writes_key(text: str, depth: int = 0) -> bool:
    """`writes_key` for each command of a piece of shell text (a `$(…)`'s, a prelude's)."""
    if depth > _MAX_NESTING:
        return secrets.written_secret(text)
    try:
        commands = split_commands(tokenize(text))
    except ShellSyntaxError:
        return secrets.written_secret(text)
    return any(writes_key(c.words, c.targets, depth) for c in commands)


def prelude_writes_key(prelude: str) -> bool:
    """Whether a profile's prelude holds a key written out (for `lint`): what `import` never
    stores, found the same way."""
    return _script_writes_key(prelude)


def names_secret(word: Word) -> bool:
    """The word uses a secret-named variable (`"$VLLM_API_KEY"`, `${HF_TOKEN:-…}`): resolved
    to a value written in the script, it would put that key in the profile."""
    return any(isinstance(seg, Var) and secrets.is_secret_name(seg.name) for seg in word.segments)


def echoes_literal(cmd: Cmd) -> bool:
    """`$(echo sk-…)`, `<(printf %s …)`: a command whose output is text written in the script."""
    if cmd.script is None:
        return False
    try:
        commands = split_commands(tokenize(cmd.script))
    except ShellSyntaxError:
        return False
    return any(
        c.words
        and c.words[0].literal in ("echo", "printf")
        and all(w.literal is not None for w in c.words)
        for c in commands
    )


def _given_in_script(word: Word) -> bool:
    """Whether the text of a here-string or input is written in the script: literal text, a
    default, or a command that echoes literal text (not `$(cat FILE)`, read at launch)."""
    for seg in word.segments:
        if isinstance(seg, Lit) and seg.text.strip():
            return True
        if isinstance(seg, Var) and seg.default:
            return True
        if isinstance(seg, Cmd) and echoes_literal(seg):
            return True
    return False
