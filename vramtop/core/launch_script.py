"""A bash launch script → the parts of a profile: prelude, environment, cwd, vLLM's argv.

Pure: text in, values out. What the script does that a profile cannot hold is reported with
its line number, and nothing is returned (`LaunchScriptError`); what can be dropped safely is
dropped with a warning.

Decisions (each is what the supervisor can reproduce faithfully):
- `export NAME=literal` → `env`. An export whose value refers to other variables
  (`export PATH="$CUDA_HOME/bin:$PATH"`) stays a shell line in the prelude, so the shell
  expands it at launch against the real environment. (Literal exports are set before the
  prelude runs; an export that a later `conda activate` would override is the one case where
  the order differs from the script.)
- `source …`, `conda activate …` and other simple commands before the vLLM command → the
  prelude, joined with ` && `. `set -e…` is dropped (the `&&` chain already stops on failure).
- `cd DIR` → `cwd` (`cd "$(dirname "$0")"` → the script's own directory, when known).
- `NAME=value` assignments are resolved into the vLLM arguments (`--port $PORT`); a variable
  the script does not define is an error naming it (`${PORT:-8000}` uses its default).
- On the vLLM command: `exec` is dropped silently; `nohup`, `&`, output redirects
  (`> log 2>&1`) and `| tee log` are dropped with a warning, because vramtop runs the server
  in its own session and writes its log itself. Other pipes, input redirects, here-documents,
  command substitution, functions, loops and conditionals around it are errors.
- Inline assignments (`CUDA_VISIBLE_DEVICES=0 vllm serve …`, `env A=B vllm serve …`) → `env`.
- The API key is never kept: `--api-key VALUE` is removed from the argv and
  `api_key_env` names the variable to export (vLLM reads `VLLM_API_KEY` itself).

Tokenising is done here rather than with `shlex`: shlex cannot tell `'$PORT'` (literal) from
`$PORT` (expanded) or a quoted `'|'` from a pipe, and those differences are the messages.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

from vramtop.core import vllm_args

# --- results ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """Something in the script, with its line (None: the script as a whole)."""

    line: int | None
    message: str

    def __str__(self) -> str:
        return self.message if self.line is None else f"line {self.line}: {self.message}"


class LaunchScriptError(ValueError):
    """The script cannot become a profile; `problems` says where and why."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


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
    warnings: list[Problem] = field(default_factory=list)

    @property
    def prelude_text(self) -> str | None:
        return " && ".join(self.prelude) if self.prelude else None


# --- tokens -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Lit:
    text: str
    quoted: bool


@dataclass(frozen=True)
class _Var:
    name: str
    raw: str
    default: str | None = None  # ${NAME:-default}


@dataclass(frozen=True)
class _Cmd:
    raw: str  # $(…) or `…`


_Segment = _Lit | _Var | _Cmd


@dataclass
class _Word:
    segments: list[_Segment]
    line: int
    start: int
    end: int

    @property
    def raw_text(self) -> str:
        out = []
        for seg in self.segments:
            out.append(seg.text if isinstance(seg, _Lit) else seg.raw)
        return "".join(out)

    @property
    def literal(self) -> str | None:
        """The text when the word expands nothing."""
        if all(isinstance(s, _Lit) for s in self.segments):
            return "".join(s.text for s in self.segments if isinstance(s, _Lit))
        return None


@dataclass(frozen=True)
class _Op:
    text: str
    line: int
    start: int
    end: int


_Token = _Word | _Op

_OPS: tuple[str, ...] = ("<<<", "<<-", "&&", "||", ";;", ">>", "<<", ">&", "<&", "&>", ">|")
_OPS = (*_OPS, "|", "&", ";", "<", ">", "(", ")")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL_PARAM = set("@*#?$!0123456789-")


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1

    def fail(self, line: int, message: str) -> LaunchScriptError:
        return LaunchScriptError([Problem(line, message)])

    def tokens(self) -> list[_Token]:
        out: list[_Token] = []
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c == "\n":
                out.append(_Op("\n", self.line, self.i, self.i + 1))
                self.line += 1
                self.i += 1
            elif c in " \t":
                self.i += 1
            elif c == "#":
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
            elif c in "|&;<>()":
                op = next(o for o in _OPS if text.startswith(o, self.i))
                if op in ("<<", "<<-"):
                    raise self.fail(self.line, "here-documents (<<) are not supported")
                out.append(_Op(op, self.line, self.i, self.i + len(op)))
                self.i += len(op)
            elif match := re.compile(r"\d+(>>|>&|<&|>|<)").match(text, self.i):
                out.append(_Op(match.group(0), self.line, self.i, match.end()))
                self.i = match.end()
            else:
                word = self._word()
                if word is not None:
                    out.append(word)
        return out

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

    def _word(self) -> _Word | None:
        text = self.text
        start, line = self.i, self.line
        segments: list[_Segment] = []
        buf: list[str] = []

        def flush(quoted: bool = False) -> None:
            if buf:
                segments.append(_Lit("".join(buf), quoted))
                buf.clear()

        while self.i < len(text):
            c = text[self.i]
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
                end = text.find("'", self.i + 1)
                if end < 0:
                    raise self.fail(self.line, "a single quote (') opened here is never closed")
                flush()
                segments.append(_Lit(text[self.i + 1 : end], quoted=True))
                self.line += text.count("\n", self.i, end)
                self.i = end + 1
            elif c == '"':
                flush()
                self._double_quoted(segments)
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
        return _Word(segments, line, start, self.i)

    def _double_quoted(self, segments: list[_Segment]) -> None:
        text = self.text
        open_line = self.line
        self.i += 1
        buf: list[str] = []
        # An empty "" still makes a word (an empty argument).
        segments.append(_Lit("", quoted=True))
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
                    segments.append(_Lit("".join(buf), quoted=True))
                    buf.clear()
                segments.append(self._dollar() if c == "$" else self._backtick())
            else:
                if c == "\n":
                    self.line += 1
                buf.append(c)
                self.i += 1
        if buf:
            segments.append(_Lit("".join(buf), quoted=True))

    def _dollar(self) -> _Segment:
        text = self.text
        i = self.i
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if nxt == "(":
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
            return _Cmd(text[i : j + 1])
        if nxt == "{":
            end = text.find("}", i)
            if end < 0:
                raise self.fail(self.line, "a '${' opened here is never closed")
            body = text[i + 2 : end]
            self.i = end + 1
            raw = text[i : end + 1]
            name_match = _NAME.match(body) or re.match(r"[@*#?$!0-9]", body)
            if not name_match:
                return _Cmd(raw)
            name, rest = name_match.group(0), body[name_match.end() :]
            if rest == "":
                return _Var(name, raw)
            if rest.startswith((":-", "-")):
                default = rest[2:] if rest.startswith(":-") else rest[1:]
                if "$" in default or "`" in default:
                    return _Cmd(raw)
                return _Var(name, raw, default)
            return _Cmd(raw)  # ${X%…}, ${X/…}, ${X:=…}: not something to evaluate here
        match = _NAME.match(text, i + 1)
        if match:
            self.i = match.end()
            return _Var(match.group(0), text[i : match.end()])
        if nxt and nxt in _SPECIAL_PARAM:
            self.i = i + 2
            return _Var(nxt, text[i : i + 2])
        self.i = i + 1
        return _Lit("$", quoted=False)

    def _backtick(self) -> _Cmd:
        end = self.text.find("`", self.i + 1)
        if end < 0:
            raise self.fail(self.line, "a backtick (`) opened here is never closed")
        raw = self.text[self.i : end + 1]
        self.line += raw.count("\n")
        self.i = end + 1
        return _Cmd(raw)


# --- commands -----------------------------------------------------------------------------


@dataclass
class _Command:
    words: list[_Word] = field(default_factory=list)
    redirects: list[tuple[str, str]] = field(default_factory=list)
    line: int = 0
    start: int = 0
    end: int = 0
    piped_in: bool = False
    pipe_to: _Command | None = None
    background: bool = False
    connector: str = ""  # the operator that came before it: "&&", "||", ";" or newline
    subshell: bool = False


def _commands(tokens: list[_Token]) -> list[_Command]:
    out: list[_Command] = []
    current = _Command()
    connector = "\n"
    subshell_depth = 0
    i = 0

    def finish() -> _Command:
        nonlocal current
        done = current
        if done.words or done.redirects:
            out.append(done)
        current = _Command()
        return done

    while i < len(tokens):
        tok = tokens[i]
        if isinstance(tok, _Word):
            if not current.words and not current.redirects:
                current.line, current.start, current.connector = tok.line, tok.start, connector
                current.subshell = subshell_depth > 0
            current.words.append(tok)
            current.end = tok.end
        elif tok.text in ("\n", ";", "&&", "||", ";;"):
            finish()
            connector = tok.text
        elif tok.text == "&":
            current.background = True
            finish()
            connector = "&"
        elif tok.text == "|":
            done = finish()
            current.piped_in = True
            current.line = tok.line
            done.pipe_to = current
        elif tok.text == "(":
            if current.words:  # NAME () — a function definition
                current.words.append(_Word([_Lit("()", False)], tok.line, tok.start, tok.end))
                i += 2 if i + 1 < len(tokens) and tokens[i + 1].text == ")" else 1  # type: ignore[union-attr]
                continue
            subshell_depth += 1
        elif tok.text == ")":
            subshell_depth = max(0, subshell_depth - 1)
            finish()
        else:  # a redirect: its target is the next word (unless it is `>&N`-style)
            target = ""
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if isinstance(nxt, _Word):
                target = nxt.raw_text
                current.end = nxt.end
                i += 1
            if not current.words and not current.redirects:
                current.line, current.start, current.connector = tok.line, tok.start, connector
            current.redirects.append((tok.text, target))
        i += 1
    finish()
    return out


# --- interpretation -----------------------------------------------------------------------

_BLOCK_OPEN = {"if": "fi", "for": "done", "while": "done", "until": "done", "case": "esac"}
_BLOCK_OPEN |= {"select": "done", "{": "}", "function": "}"}
_BLOCK_NAMES = {"if": "`if` block", "case": "`case` block", "{": "`{ … }` group"}
_BLOCK_NAMES |= {loop: f"`{loop}` loop" for loop in ("for", "while", "until", "select")}
_BLOCK_CLOSE = {"fi", "done", "esac", "}"}
_WRAPPERS = {"exec", "nohup", "env", "time", "command"}
_DECLARE = {"declare", "typeset", "readonly", "local"}
_SCRIPT_DIR = re.compile(r"""^\$\(\s*dirname\s+"?\$(0|\{0\}|\{BASH_SOURCE(\[0\])?\})"?\s*\)$""")
_MODULE_HINT = re.compile(r"vllm\.entrypoints|vramtop\.sim\.server")
# Commands that can run vLLM on someone's behalf; recognised only to say they are unsupported.
_LAUNCHERS = {"docker", "podman", "sudo", "uv", "uvx", "conda", "srun", "taskset", "numactl"}
_LAUNCHERS |= {"apptainer", "singularity", "pipx", "nice", "ionice", "timeout"}


def _basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


_FORMS = (
    "`vllm serve MODEL …`, `python -m vllm.entrypoints.openai.api_server --model MODEL …` "
    "or `python -m vllm.entrypoints.cli.main serve MODEL …`"
)


class _Unresolved(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class _Variable:
    value: str | None  # None: known to exist but its value is only known at run time
    line: int
    why: str = ""
    unresolved: str = ""  # why the value could not be worked out


class _Interpreter:
    def __init__(self, text: str, script_dir: str | None) -> None:
        self.text = text
        self.script_dir = script_dir
        self.vars: dict[str, _Variable] = {}
        self.errors: list[Problem] = []
        self.result: ParsedLaunch | None = None
        self.blocks: list[tuple[str, int]] = []
        self.prelude: list[str] = []
        self.env: dict[str, str] = {}
        self.cwd: str | None = None
        self.warnings: list[Problem] = []
        self.api_key_literal = False

    # values

    def resolve(self, word: _Word) -> str:
        out = []
        for seg in word.segments:
            if isinstance(seg, _Lit):
                out.append(seg.text)
            elif isinstance(seg, _Cmd):
                raise _Unresolved(
                    f"command substitution {seg.raw} cannot be stored in a profile; "
                    "write its value instead"
                )
            else:
                out.append(self._variable(seg))
        return "".join(out)

    def _variable(self, seg: _Var) -> str:
        var = self.vars.get(seg.name)
        if var is None:
            if seg.default is not None:
                return seg.default
            if seg.name in _SPECIAL_PARAM:
                raise _Unresolved(
                    f"{seg.raw} is one of the script's own arguments; a profile runs without "
                    "any: write the value instead"
                )
            raise _Unresolved(
                f"${seg.name} is not defined in the script; write the value or set "
                f"{seg.name}=… above the command"
            )
        if var.value is None:
            raise _Unresolved(
                f"${seg.name} (set on line {var.line}{var.why}) is only known when the script "
                "runs; write the value instead"
            )
        return var.value

    def source_text(self, cmd: _Command) -> str:
        return re.sub(r"\\\n[ \t]*", " ", self.text[cmd.start : cmd.end]).strip()

    def _assign(self, word: _Word, line: int) -> tuple[str, _Variable] | None:
        first = word.segments[0] if word.segments else None
        if not isinstance(first, _Lit) or first.quoted:
            return None
        match = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=", first.text)
        if not match:
            return None
        rest = _Word([_Lit(first.text[match.end() :], False), *word.segments[1:]], line, 0, 0)
        try:
            return match.group(1), _Variable(self.resolve(rest), line)
        except _Unresolved as exc:
            why = " from a command" if any(isinstance(s, _Cmd) for s in rest.segments) else ""
            return match.group(1), _Variable(None, line, why, exc.message)

    # commands

    def run(self, commands: list[_Command]) -> None:
        for cmd in commands:
            try:
                self._one(cmd)
            except _Unresolved as exc:
                self.errors.append(Problem(cmd.line, exc.message))

    def _one(self, cmd: _Command) -> None:
        words = cmd.words
        head = words[0].literal if words else None
        if head in _BLOCK_OPEN or (len(words) >= 2 and words[1].literal == "()"):
            kind = "function" if head == "function" or head not in _BLOCK_OPEN else head
            self.blocks.append((_BLOCK_NAMES.get(kind, kind), cmd.line))
            if kind == "function":
                self.errors.append(
                    Problem(
                        cmd.line,
                        "shell functions are not supported; write the commands "
                        "at the top level of the script",
                    )
                )
            self._block_body(cmd, words[1:] if head in ("then", "do") else [])
            return
        if head in ("then", "do", "else", "elif"):
            self._block_body(cmd, words[1:])
            return
        if head in _BLOCK_CLOSE:
            if self.blocks:
                self.blocks.pop()
            return
        if self.blocks or cmd.subshell:
            self._inside_block(cmd)
            return
        self._simple(cmd)

    def _block_body(self, cmd: _Command, rest: list[_Word]) -> None:
        if rest:
            inner = _Command(rest, cmd.redirects, cmd.line, rest[0].start, cmd.end)
            self._inside_block(inner)

    def _inside_block(self, cmd: _Command) -> None:
        if self._is_vllm_like(cmd):
            kind, line = self.blocks[0] if self.blocks else ("`( … )` subshell", cmd.line)
            self.errors.append(
                Problem(
                    cmd.line,
                    f"the vLLM command is inside {_article(kind)} {kind} (line {line}); "
                    "vramtop runs it "
                    "directly and restarts it itself: move it out to the top level",
                )
            )
        elif self.result is None and not self.errors:
            kind, line = self.blocks[0] if self.blocks else ("`( … )` subshell", cmd.line)
            self.errors.append(
                Problem(line, f"a {kind} is not supported in a launch script's prelude")
            )

    def _is_vllm_like(self, cmd: _Command) -> bool:
        """Whether the command runs vLLM (directly or through a wrapper such as docker)."""
        texts = [w.raw_text for w in cmd.words]
        while texts and (texts[0] in _WRAPPERS or re.match(r"^[A-Za-z_]\w*=", texts[0])):
            texts.pop(0)
        if not texts:
            return False
        if any(_MODULE_HINT.search(t) for t in texts):
            return True
        first = texts[0]
        with contextlib.suppress(_Unresolved):
            first = self.resolve(cmd.words[len(cmd.words) - len(texts)])
        if _basename(first) == "vllm":
            return True
        if first == "conda" and "run" not in texts[1:3]:
            return False  # `conda activate vllm`: an environment named vllm
        return _basename(first) in _LAUNCHERS and any(
            _basename(t) == "vllm" or "vllm-openai" in t for t in texts[1:]
        )

    def _simple(self, cmd: _Command) -> None:
        words = list(cmd.words)
        inline: dict[str, _Variable] = {}
        while words and (assign := self._assign(words[0], cmd.line)):
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
                if assign := self._assign(word, cmd.line):
                    self.vars[assign[0]] = assign[1]
        elif head == "cd":
            self._cd(cmd, words[1:])
        else:
            self.prelude.append(self.source_text(cmd))

    # parts

    def _export(self, cmd: _Command, args: list[_Word]) -> None:
        shell_side = False
        for word in args:
            if word.literal and word.literal.startswith("-"):
                shell_side = True
                continue
            assign = self._assign(word, cmd.line)
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
            rest_literal = all(isinstance(s, _Lit) for s in word.segments)
            if var.value is not None and rest_literal:
                self._set_env(name, var.value, cmd.line)
            else:
                # Refers to the environment (PATH, LD_LIBRARY_PATH…): let the shell expand it.
                shell_side = True
                self.vars[name] = _Variable(None, cmd.line, ", from the environment")
        if shell_side:
            self.prelude.append(self.source_text(cmd))

    def _set_env(self, name: str, value: str, line: int) -> None:
        if name == "VLLM_API_KEY":
            self.api_key_literal = True
            self.warnings.append(
                Problem(
                    line,
                    "the API key is written in the script; vramtop does not store "
                    "it: export VLLM_API_KEY in your shell instead",
                )
            )
            return
        self.env[name] = value

    def _cd(self, cmd: _Command, args: list[_Word]) -> None:
        if not args:
            raise _Unresolved("`cd` without a directory (home) is not supported; name it")
        word = args[0]
        only = _only_segment(word)
        if isinstance(only, _Cmd) and _SCRIPT_DIR.match(only.raw):
            if self.script_dir is None:
                raise _Unresolved("`cd` to the script's directory, which is not known here")
            self.cwd = self.script_dir
            return
        target = self.resolve(word)
        if self.cwd and not target.startswith(("/", "~")):
            target = self.cwd.rstrip("/") + "/" + target
        self.cwd = target

    def _vllm(self, cmd: _Command, words: list[_Word], inline: dict[str, _Variable]) -> None:
        if self.result is not None:
            self.errors.append(
                Problem(
                    cmd.line,
                    f"a second vLLM command (the first is on line "
                    f"{self.result.line}); a profile runs one server",
                )
            )
            return
        notes: list[Problem] = []
        while words and words[0].literal in _WRAPPERS:
            wrapper = words.pop(0).literal
            if wrapper == "nohup":
                notes.append(
                    Problem(
                        cmd.line,
                        "`nohup` dropped: vramtop runs the server in "
                        "its own session, so it survives a closed terminal",
                    )
                )
            while wrapper == "env" and words and (a := self._assign(words[0], cmd.line)):
                inline[a[0]] = a[1]
                words.pop(0)
        argv: list[str] = []
        api_key_env: str | None = None
        api_key_literal = False
        skip_next = False
        for index, word in enumerate(words):
            if skip_next:
                skip_next = False
                continue
            key_value = self._api_key_value(word, words[index + 1 : index + 2])
            if key_value is not None:
                value_word, skip_next = key_value
                api_key_env, api_key_literal = self._api_key(value_word)
                continue
            only = _only_segment(word)
            if isinstance(only, _Var) and only.name in ("@", "*"):
                notes.append(
                    Problem(
                        cmd.line,
                        f"{only.raw} (the script's own "
                        "arguments) dropped: a profile runs without any",
                    )
                )
                continue
            try:
                argv.append(self.resolve(word))
            except _Unresolved as exc:
                self.errors.append(Problem(word.line, exc.message))
        if vllm_args.launch_form(argv) is None:
            first = argv[0] if argv else "?"
            if first in ("docker", "podman"):
                message = (
                    f"`{first} run` is not supported: vramtop runs and stops vLLM as a process "
                    "on this machine; run `vllm serve` directly"
                )
            else:
                message = f"`{first} …` is not a vLLM launch vramtop knows; it recognises {_FORMS}"
            self.errors.append(Problem(cmd.line, message))
            return
        notes.extend(self._plumbing(cmd))
        env: dict[str, str] = {}
        for name, var in inline.items():
            if var.value is None:
                self.errors.append(Problem(cmd.line, f"inline variable {name}: {var.unresolved}"))
            else:
                env[name] = var.value
        self.env.update(env)
        self.result = ParsedLaunch(
            argv=argv,
            line=cmd.line,
            api_key_env=api_key_env,
            api_key_in_script=api_key_literal,
        )
        self.warnings.extend(notes)

    @staticmethod
    def _api_key_value(word: _Word, following: list[_Word]) -> tuple[_Word | None, bool] | None:
        """For `--api-key V` / `--api-key=V`: (the value's word, whether it is the next word)."""
        first = word.segments[0] if word.segments else None
        if not isinstance(first, _Lit) or first.quoted or not first.text.startswith("--"):
            return None
        flag, eq, rest = first.text.partition("=")
        if vllm_args.canonical_flag(flag) != vllm_args.API_KEY:
            return None
        if eq:
            return _Word([_Lit(rest, False), *word.segments[1:]], word.line, 0, 0), False
        return (following[0], True) if following else (None, False)

    def _api_key(self, value_word: _Word | None) -> tuple[str, bool]:
        """Drop the key from the argv: (the variable to take it from, whether it was a value)."""
        if value_word is not None:
            segs = [s for s in value_word.segments if not (isinstance(s, _Lit) and not s.text)]
            if len(segs) == 1 and isinstance(segs[0], _Var):
                name = segs[0].name
                var = self.vars.get(name)
                if var is None or var.value is None:
                    return name, False  # taken from the environment at launch: fine
        return "VLLM_API_KEY", True

    def _plumbing(self, cmd: _Command) -> list[Problem]:
        """Background, redirects and pipes on the vLLM command: drop or refuse."""
        notes: list[Problem] = []
        if cmd.piped_in:
            self.errors.append(
                Problem(
                    cmd.line, "the vLLM command reads from a pipe; a profile cannot hold a pipe"
                )
            )
        outputs = [
            f"{op}{target}" if op.endswith("&") else f"{op} {target}".strip()
            for op, target in cmd.redirects
            if ">" in op
        ]
        inputs = [f"{op} {target}" for op, target in cmd.redirects if ">" not in op]
        if inputs:
            self.errors.append(
                Problem(
                    cmd.line, f"input redirect `{inputs[0]}` on the vLLM command is not supported"
                )
            )
        if outputs:
            notes.append(
                Problem(
                    cmd.line,
                    f"output redirect `{' '.join(outputs)}` dropped: "
                    "vramtop writes the server's log itself (`vramtop logs`)",
                )
            )
        sink = cmd.pipe_to
        if sink is not None:
            name = sink.words[0].raw_text if sink.words else "?"
            if name == "tee":
                notes.append(
                    Problem(
                        cmd.line,
                        "`| tee …` dropped: vramtop writes the server's "
                        "log itself (`vramtop logs`)",
                    )
                )
                sink.words = []  # consumed
            else:
                self.errors.append(
                    Problem(
                        cmd.line,
                        f"the vLLM command's output is piped to "
                        f"`{name}`; a profile cannot hold a pipe",
                    )
                )
        if cmd.background:
            notes.append(
                Problem(cmd.line, "`&` dropped: vramtop runs the server in the background itself")
            )
        return notes


def parse_launch_script(text: str, script_dir: str | None = None) -> ParsedLaunch:
    """Parse a bash launch script; raise `LaunchScriptError` listing every problem found.

    `script_dir` (the script's directory) resolves `cd "$(dirname "$0")"`.
    """
    text = text.replace("\r\n", "\n")  # scripts edited on Windows (WSL users)
    tokens = _Lexer(text).tokens()
    interp = _Interpreter(text, script_dir)
    commands = _commands(tokens)
    # A pipe's consumer (`| tee log`) is handled with the command that feeds it.
    interp.run([c for c in commands if not (c.piped_in and c.words and _is_tee(c))])
    if interp.blocks and not interp.errors:
        kind, line = interp.blocks[-1]
        interp.errors.append(Problem(line, f"this {kind} is never closed"))
    if interp.result is None and not interp.errors:
        interp.errors.append(Problem(None, f"no vLLM command found; vramtop recognises {_FORMS}"))
    if interp.errors:
        raise LaunchScriptError(sorted(interp.errors, key=lambda p: p.line or 0))
    result = interp.result
    assert result is not None
    result.env = interp.env
    result.prelude = interp.prelude
    result.cwd = interp.cwd
    result.api_key_in_script = result.api_key_in_script or interp.api_key_literal
    if interp.api_key_literal and result.api_key_env is None:
        result.api_key_env = "VLLM_API_KEY"
    result.warnings = sorted(interp.warnings, key=lambda p: p.line or 0)
    return result


def _article(noun: str) -> str:
    return "an" if noun.startswith("`if") else "a"


def _only_segment(word: _Word) -> _Segment | None:
    """The word's single meaningful part (`"$@"` is an empty quote plus `$@`), if it has one."""
    parts = [s for s in word.segments if not (isinstance(s, _Lit) and not s.text)]
    return parts[0] if len(parts) == 1 else None


def _is_tee(cmd: _Command) -> bool:
    return cmd.words[0].raw_text == "tee"
