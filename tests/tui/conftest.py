"""Console tests (the helpers: tests.support.console); vramtop's files are kept in a temp dir
by tests/conftest.py's `private_home`, as for every test."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def colours(monkeypatch: pytest.MonkeyPatch) -> None:
    """The console in colour, whatever the shell running the tests asks."""
    monkeypatch.delenv("NO_COLOR", raising=False)
