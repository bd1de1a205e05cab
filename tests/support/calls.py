"""How often a call reaches a function: for tests of work that must not be done again (a CA
bundle loaded for a plain-http client, a command line parsed on every frame).

Watched through the interpreter's profile hook (`sys.setprofile`): the real calls, made by
the real code, on this thread; nothing is replaced."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")


def calls_into(function: Callable[..., Any], call: Callable[[], T]) -> tuple[T, int]:
    """`call`'s result, and how many times it called `function` (a Python function) on this
    thread."""
    code = function.__code__
    seen = 0

    def watch(frame: FrameType, event: str, _arg: object) -> None:
        nonlocal seen
        if event == "call" and frame.f_code is code:
            seen += 1

    before = sys.getprofile()
    sys.setprofile(watch)
    try:
        result = call()
    finally:
        sys.setprofile(before)
    return result, seen
