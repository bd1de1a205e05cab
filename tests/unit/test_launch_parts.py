"""The launch script walk's two helpers on their own: the prelude it gathers (`Prelude`) and
the keys it meets (`ScriptSecrets`)."""

from __future__ import annotations

from vramtop.core.launch.prelude import Prelude
from vramtop.core.launch.problems import Problem
from vramtop.core.launch.script_secrets import ScriptSecrets
from vramtop.core.launch.shell_commands import Command, split_commands
from vramtop.core.launch.shell_lex import tokenize
from vramtop.core.launch.variables import ScriptVariables

KEY = "sk-LIVE-321"


def commands(text: str) -> list[Command]:
    return split_commands(tokenize(text))


def test_the_prelude_keeps_each_line_as_written_and_set_a_around_the_lines_it_covers() -> None:
    text = 'source a.sh\nset -a\nsource\\\n  env.sh\nset +a\nexport P="$HOME/bin"\n'
    errors: list[Problem] = []
    prelude = Prelude(text, errors)
    first, set_a, sourced, set_plus_a, export = commands(text)
    prelude.add_command(first)
    prelude.set_options(set_a.words[1:])
    prelude.add_command(sourced)
    prelude.set_options(set_plus_a.words[1:])
    prelude.add_words(export.line, "export", export.words[1:])
    assert prelude.lines == [
        "source a.sh",
        "set -a",
        "source env.sh",
        "set +a",
        'export P="$HOME/bin"',
    ]
    assert errors == []


def test_the_prelude_refuses_a_line_that_writes_a_key() -> None:
    text = f"printf -v HF_TOKEN '{KEY}'\n"
    errors: list[Problem] = []
    prelude = Prelude(text, errors)
    prelude.add_command(commands(text)[0])
    assert prelude.lines == []
    assert [p.line for p in errors] == [1] and "never stores one" in errors[0].message


def test_a_key_written_in_the_script_is_withheld_noted_once_and_masked() -> None:
    variables, warnings = ScriptVariables(), list[Problem]()
    keys = ScriptSecrets(variables, warnings)
    keys.written("VLLM_API_KEY", KEY, 3)
    keys.written("VLLM_API_KEY", KEY, 4)
    assert keys.api_key == ("VLLM_API_KEY", True)
    assert variables["VLLM_API_KEY"].value is None  # known to exist, never stored
    assert [p.line for p in warnings] == [3]
    shown = keys.redact(Problem(7, f"the value {KEY!r} and '{KEY}'"))
    assert KEY not in shown.message and shown.line == 7
