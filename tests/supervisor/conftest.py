"""Fixtures for supervisor tests: a private VRAMTOP_HOME, free ports, and a sweep that ends
every process a test launched, even when the test failed half-way."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from vramtop.config import Profile

FAKE_SERVER = Path(__file__).with_name("fake_server.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


def fake_profile(name: str, port: int, ledger: Path, util: float = 0.9, **env: str) -> Profile:
    return Profile(
        name=name,
        argv=[
            sys.executable,
            str(FAKE_SERVER),
            "fake-model",
            "--port",
            str(port),
            "--gpu-memory-utilization",
            str(util),
            "--api-key",
            "sekrit-key-123",
        ],
        env={"FAKE_LEDGER_DIR": str(ledger), "FAKE_STARTUP_S": "0.2", **env},
        port=port,
        stop_timeout_s=3,
    )


def ledger_empty(ledger: Path) -> bool:
    """The fake "GPU" holds nothing: no allocation file of a live process is left."""
    return all(not psutil.pid_exists(int(entry.name)) for entry in ledger.iterdir())
