"""Fixtures for the senders' tests: fake executables first on PATH, a piece of news."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from notify_fakes import Fakes, contention

from vramtop.core.news import News, finding_opened


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fakes:
    made = Fakes(tmp_path)
    monkeypatch.setenv("PATH", f"{made.bin}{os.pathsep}{os.environ.get('PATH', '')}")
    return made


@pytest.fixture
def news() -> News:
    return finding_opened(contention())
