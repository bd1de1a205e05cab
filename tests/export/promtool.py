"""Debian's Prometheus tools for the tests: found on PATH, or the test is skipped saying why."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

MISSING = (
    "{tool} not found: these tests need Debian's `prometheus` package "
    "(apt-get install prometheus; .ci/run installs it when it is missing)"
)


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(MISSING.format(tool=name))
    return path


def promtool(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )
