"""Fixtures for supervisor tests: a private VRAMTOP_HOME and a sweep that ends every process a
test launched, even when the test failed half-way."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    yield tmp_path / "home"
    sweep(tmp_path)


def sweep(tmp_path: Path) -> None:
    """Kill anything still carrying a launch id from this test's home (a failed test)."""
    marker = str(tmp_path)
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        with contextlib.suppress(psutil.Error):
            env = proc.environ()
            if marker in env.get("VRAMTOP_HOME", "") or marker in env.get("FAKE_LEDGER_DIR", ""):
                proc.send_signal(signal.SIGKILL)


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger"
    path.mkdir()
    return path
