"""The shell constructs a profile cannot hold, and which command is the vLLM launch.

Each check looks at one command and says what it found as `Problem`s; deciding what to keep
is the interpreter's (`launch_script`). Blocks (`if`, loops, `{ … }`, functions) and
subshells around the vLLM command are refused, because vramtop runs and restarts it directly;
background, output redirects and `| tee` on it are dropped, because vramtop runs it in its
own session and writes its log itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from vramtop.core.launch.problems import Problem
from vramtop.core.launch.shell_commands import Command
from vramtop.core.launch.shell_lex import Word

_BLOCK_OPEN = {"if": "fi", "for": "done", "while": "done", "until": "done", "case": "esac"}
_BLOCK_OPEN |= {"select": "done", "{": "}", "function": "}"}
_BLOCK_NAMES = {"if": "`if` block", "case": "`case` block", "{": "`{ … }` group"}
_BLOCK_NAMES |= {loop: f"`{loop}` loop" for loop in ("for", "while", "until", "select")}
BLOCK_CLOSE = {"fi", "done", "esac", "}"}
BLOCK_CONTINUE = ("then", "do", "else", "elif")
"""Words that go on inside an open block; what follows them on the line is its body."""
WRAPPERS = {"exec", "nohup", "env", "time", "command"}
_MODULE_HINT = re.compile(r"vllm\.entrypoints|vramtop\.sim\.server")
# Commands that can run vLLM on someone's behalf; recognised only to say they are unsupported.
_LAUNCHERS = {"docker", "podman", "sudo", "uv", "uvx", "conda", "srun", "taskset", "numactl"}
_LAUNCHERS |= {"apptainer", "singularity", "pipx", "nice", "ionice", "timeout"}
_SUBSHELL = "`( … )` subshell"
_LOG_ITSELF = "vramtop writes the server's log itself (`vramtop logs`)"

FORMS = (
    "`vllm serve MODEL …`, `python -m vllm.entrypoints.openai.api_server --model MODEL …` "
    "or `python -m vllm.entrypoints.cli.main serve MODEL …`"
)


# --- blocks -------------------------------------------------------------------------------


def opened_block(cmd: Command) -> str | None:
    """The block the command opens (`if`, `for`…, `function` for `NAME ()` too), if any."""
    words = cmd.words
    head = words[0].literal if words else None
    if head in _BLOCK_OPEN or (len(words) >= 2 and words[1].literal == "()"):
        return "function" if head == "function" or head not in _BLOCK_OPEN else head
    return None


def block_name(kind: str) -> str:
    return _BLOCK_NAMES.get(kind, kind)


def function_unsupported(line: int) -> Problem:
    return Problem(
        line,
        "shell functions are not supported; write the commands at the top level of the script",
    )


def vllm_inside_block(cmd: Command, blocks: list[tuple[str, int]]) -> Problem:
    kind, line = blocks[0] if blocks else (_SUBSHELL, cmd.line)
    return Problem(
        cmd.line,
        f"the vLLM command is inside {_article(kind)} {kind} (line {line}); "
        "vramtop runs it "
        "directly and restarts it itself: move it out to the top level",
    )


def block_in_prelude(cmd: Command, blocks: list[tuple[str, int]]) -> Problem:
    kind, line = blocks[0] if blocks else (_SUBSHELL, cmd.line)
    return Problem(line, f"a {kind} is not supported in a launch script's prelude")


def never_closed(blocks: list[tuple[str, int]]) -> Problem:
    kind, line = blocks[-1]
    return Problem(line, f"this {kind} is never closed")


def _article(noun: str) -> str:
    return "an" if noun.startswith("`if") else "a"


# --- the vLLM command ---------------------------------------------------------------------


def is_vllm_like(cmd: Command, resolve: Callable[[Word], str | None]) -> bool:
    """Whether the command runs vLLM (directly or through a wrapper such as docker).

    `resolve` gives a word's value, or None when the script cannot say it.
    """
    texts = [w.raw_text for w in cmd.words]
    while texts and (texts[0] in WRAPPERS or re.match(r"^[A-Za-z_]\w*=", texts[0])):
        texts.pop(0)
    if not texts:
        return False
    if any(_MODULE_HINT.search(t) for t in texts):
        return True
    first = texts[0]
    resolved = resolve(cmd.words[len(cmd.words) - len(texts)])
    if resolved is not None:
        first = resolved
    if _basename(first) == "vllm":
        return True
    if first == "conda" and "run" not in texts[1:3]:
        return False  # `conda activate vllm`: an environment named vllm
    return _basename(first) in _LAUNCHERS and any(
        _basename(t) == "vllm" or "vllm-openai" in t for t in texts[1:]
    )


def unknown_launch(line: int, argv: list[str]) -> Problem:
    """The command looked like vLLM but its argv is no launch form vramtop knows."""
    first = argv[0] if argv else "?"
    if first in ("docker", "podman"):
        message = (
            f"`{first} run` is not supported: vramtop runs and stops vLLM as a process "
            "on this machine; run `vllm serve` directly"
        )
    else:
        message = f"`{first} …` is not a vLLM launch vramtop knows; it recognises {FORMS}"
    return Problem(line, message)


def nohup_dropped(line: int) -> Problem:
    return Problem(
        line,
        "`nohup` dropped: vramtop runs the server in its own session, so it survives a closed "
        "terminal",
    )


def plumbing(cmd: Command) -> tuple[list[Problem], list[Problem]]:
    """Background, redirects and pipes on the vLLM command: (refused, dropped with a note).

    A `| tee` it feeds is consumed (its words emptied).
    """
    errors: list[Problem] = []
    notes: list[Problem] = []
    if cmd.piped_in:
        errors.append(
            Problem(cmd.line, "the vLLM command reads from a pipe; a profile cannot hold a pipe")
        )
    outputs = [
        f"{op}{target}" if op.endswith("&") else f"{op} {target}".strip()
        for op, target in cmd.redirects
        if ">" in op
    ]
    inputs = [f"{op} {target}" for op, target in cmd.redirects if ">" not in op]
    if inputs:
        errors.append(
            Problem(cmd.line, f"input redirect `{inputs[0]}` on the vLLM command is not supported")
        )
    if outputs:
        notes.append(
            Problem(cmd.line, f"output redirect `{' '.join(outputs)}` dropped: {_LOG_ITSELF}")
        )
    sink = cmd.pipe_to
    if sink is not None:
        name = sink.words[0].raw_text if sink.words else "?"
        if name == "tee":
            notes.append(Problem(cmd.line, f"`| tee …` dropped: {_LOG_ITSELF}"))
            sink.words = []  # consumed
        else:
            errors.append(
                Problem(
                    cmd.line,
                    f"the vLLM command's output is piped to `{name}`; a profile cannot hold a pipe",
                )
            )
    if cmd.background:
        notes.append(
            Problem(cmd.line, "`&` dropped: vramtop runs the server in the background itself")
        )
    return errors, notes


def is_tee(cmd: Command) -> bool:
    return cmd.words[0].raw_text == "tee"


def _basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]
