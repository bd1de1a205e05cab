"""Values written into a systemd unit (core/unit_words.py) read back, by a model of systemd's
own reading (tests/support/systemd_unit.py), as exactly the words given: any text accepted
survives, and none adds a line, a word, a specifier or a variable."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support import systemd_unit
from tests.support.examples import examples
from vramtop.core.unit_words import (
    UnitValueError,
    environment_line,
    exec_line,
    value_problem,
)

PYTHON = "/usr/bin/python3"
# Every kind of character, the ones systemd reads specially made likely.
SPECIAL = " \t\n\r\0\"'\\$%;{}#=\u2028\u00a0\x7f\x85\udcff"
text = st.text(alphabet=st.one_of(st.sampled_from(SPECIAL), st.characters()), max_size=40)


def unit_with(line: str) -> str:
    return f"[Service]\n{line}\nRestart=on-failure\n"


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(text, max_size=6))
@example(["echo\nExecStart=/bin/touch /tmp/X\n#"])
@example(["$HOME", "${HOME}", "$$", "%h", "%%", "%n%", ";", "\\;", "a ; b", "", "'", '"'])
def test_an_accepted_command_reads_back_as_given_on_one_line(argv: list[str]) -> None:
    arguments = [("--on-finding", word) for word in argv]
    try:
        value = exec_line(PYTHON, arguments)
    except UnitValueError:
        assert any(value_problem(word) is not None for word in argv)
        return
    assert all(value_problem(word) is None for word in argv)
    read = systemd_unit.settings(unit_with(f"ExecStart={value}"))
    assert read == [("Service", "ExecStart", value), ("Service", "Restart", "on-failure")]
    assert systemd_unit.exec_argv(value) == [PYTHON, *argv]


@settings(max_examples=examples(200), deadline=None)
@given(text)
@example("/home/me/$HOME%h dir")
def test_an_accepted_environment_value_reads_back_as_given(home: str) -> None:
    try:
        value = environment_line("VRAMTOP_HOME", home)
    except UnitValueError:
        assert value_problem(home) is not None
        return
    read = systemd_unit.settings(unit_with(f"Environment={value}"))
    assert read[0] == ("Service", "Environment", value) and len(read) == 2
    assert systemd_unit.environment(value) == {"VRAMTOP_HOME": home}


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("echo\nExecStart=/bin/touch /tmp/X\n#", "a line break (character 5)"),
        ("a\rb", "a carriage return"),
        ("a\0b", "a NUL"),
        ("a\tb", "a tab"),
        ("a\x1bb", "U+001B"),
        ("a\x85b", "U+0085"),
        ("a\u2028b", "U+2028"),
        ("a\u202eb", "U+202E"),
        ("caf\udce9", "not UTF-8"),
    ],
)
def test_a_value_a_unit_cannot_hold_is_refused_by_name(value: str, said: str) -> None:
    with pytest.raises(UnitValueError) as refused:
        exec_line(PYTHON, [("--on-finding", value)])
    assert str(refused.value).startswith("--on-finding has ") and said in str(refused.value)
    assert value not in str(refused.value)  # the value may hold a secret: not repeated
    with pytest.raises(UnitValueError):
        environment_line("VRAMTOP_HOME", value)


def test_what_is_written_is_systemds_quoting_not_a_shells() -> None:
    value = exec_line(PYTHON, [("w", "$HOME"), ("w", "%h"), ("w", 'say "hi" \\o/'), ("w", "ok")])
    assert value == f'{PYTHON} "$$HOME" "%%h" "say \\"hi\\" \\\\o/" ok'
    assert environment_line("VRAMTOP_HOME", "/tmp/a b%$") == '"VRAMTOP_HOME=/tmp/a b%%$"'


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("bin/python", "not absolute"),
        ("/opt/$HOME/python", "'$'"),
        ("/opt/it's/python", '"\'"'),
        ("/opt/a\\b/python", "'\\\\'"),
        ("/opt/a\nb/python", "a line break"),
    ],
)
def test_an_executable_systemd_would_not_run_is_refused(path: str, said: str) -> None:
    with pytest.raises(UnitValueError) as refused:
        exec_line(path, [])
    assert str(refused.value).startswith("this vramtop's path ") and said in str(refused.value)


def test_an_executable_with_a_space_or_percent_reads_back() -> None:
    path = "/home/me/my tools/100%/python"
    assert systemd_unit.exec_argv(exec_line(path, [("w", "x")])) == [path, "x"]


def test_the_model_refuses_what_systemd_would_expand_or_split() -> None:
    """The reader is strict: these are the mistakes the tests above would catch."""
    for value in (
        f"{PYTHON} $HOME",
        f"{PYTHON} %h",
        f"{PYTHON} a ; b",
        f'{PYTHON} "unbalanced',
        f"{PYTHON} \\d",
    ):
        with pytest.raises(systemd_unit.Unreadable):
            systemd_unit.exec_argv(value)
    assert len(systemd_unit.settings(unit_with("ExecStart=/bin/a\nExecStart=/bin/b"))) == 3
    assert len(systemd_unit.settings(unit_with("ExecStart=/bin/a\\\nExecStart=/bin/b"))) == 2
