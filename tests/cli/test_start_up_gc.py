"""The console starts without the cyclic collector; every command, and the console once it
has drawn, runs with it."""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

import pytest

from vramtop import entry
from vramtop.commands import monitor, status


@pytest.fixture(autouse=True)
def _home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path))


def _run(monkeypatch: pytest.MonkeyPatch, *argv: str) -> None:
    monkeypatch.setattr(sys, "argv", ["vramtop", *argv])
    with pytest.raises(SystemExit) as ended:
        entry.run()
    assert ended.value.code == 0


def test_the_console_starts_without_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def console(args: argparse.Namespace) -> int:
        seen.append(gc.isenabled())
        return 0

    monkeypatch.setattr(monitor, "run", console)
    _run(monkeypatch, "--demo")
    assert seen == [False]
    assert gc.isenabled()  # and it is back once the command has ended


@pytest.mark.parametrize("argv", [["status", "--json"], ["--once", "--demo"]])
def test_other_commands_run_with_the_collector(
    monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    seen: list[bool] = []

    def command(args: argparse.Namespace) -> int:
        seen.append(gc.isenabled())
        return 0

    monkeypatch.setattr(status, "run", command)
    monkeypatch.setattr(monitor, "run", command)
    _run(monkeypatch, *argv)
    assert seen == [True]
