"""Ctrl+C ends vramtop with status 130 and no traceback, also while it is still importing."""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from types import ModuleType

import pytest

from vramtop import entry


class _InterruptedImport(importlib.abc.MetaPathFinder):
    """Ctrl+C arriving while Python imports `name`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> None:
        if fullname == self.name:
            raise KeyboardInterrupt
        return None


def test_ctrl_c_while_importing_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "vramtop.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_InterruptedImport("vramtop.cli"), *sys.meta_path])
    with pytest.raises(SystemExit) as ended:
        entry.run()
    assert ended.value.code == entry.INTERRUPTED


def test_ctrl_c_while_parsing_the_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from vramtop import cli

    def interrupted(argv: object = None) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "parse_args", interrupted)
    with pytest.raises(SystemExit) as ended:
        entry.run()
    assert ended.value.code == entry.INTERRUPTED


def test_the_command_s_own_status_passes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    from vramtop import cli

    monkeypatch.setattr(cli, "main", lambda: 2)
    with pytest.raises(SystemExit) as ended:
        entry.run()
    assert ended.value.code == 2
