"""A command shown to copy into a shell (core/shell_words.py) is one line, and bash reads it
back as the very words: checked by a real bash, for any words."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from vramtop.core.shell_words import shell_line

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")

# Any character a process's argument can hold (no NUL), the ones shells read specially made
# likely, and the bytes that are not UTF-8 as Python keeps them.
SPECIAL = " \t\n\r\"'\\$`!*?;&|<>(){}#~=%\x1b\x7f\x85\u2028\u00a0\udcff\udc80é😀"
word = st.text(
    alphabet=st.one_of(
        st.sampled_from(SPECIAL),
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
    ),
    max_size=20,
)


def bash_reads(line: str) -> list[bytes]:
    """The words bash gives a command written as `line` (in a UTF-8 locale)."""
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", f"printf '%s\\0' {line}"],
        capture_output=True,
        env={**os.environ, "LC_ALL": "C.UTF-8"},
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split(b"\0")[:-1]


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(word, min_size=1, max_size=5))
@example(["vllm", "serve", "m", "--chat-template", "{{ a }}\n  status: ready\n"])
@example(["--api-key", "it's", "$HOME", "`id`", "a;b", "", "\x1b[2J"])
def test_a_command_is_one_line_that_bash_reads_back_as_its_words(words: list[str]) -> None:
    line = shell_line(words)
    assert line.isprintable()  # one line: no line break, no escape sequence for the terminal
    assert bash_reads(line) == [w.encode("utf-8", "surrogateescape") for w in words]


def test_printable_words_are_quoted_as_shlex_quotes_them() -> None:
    assert shell_line(["vllm", "serve", "my model", "--x", "it's"]) == (
        "vllm serve 'my model' --x 'it'\"'\"'s'"
    )
    assert shell_line(["a\nb", "tab\there"]) == "$'a\\nb' $'tab\\there'"
