"""Helpers shared by the supervisor tests: free ports, the fake server's profile, its ledger,
a machine without a GPU."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx
import psutil

from tests.support import http
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.config import Profile
from vramtop.core.model import GpuReading

FAKE_SERVER = Path(__file__).with_name("fake_vllm.py")


class NoGpu:
    """A GPU probe of a machine without one."""

    def read(self) -> GpuReading:
        return GpuReading(error="no GPU here")

    def close(self) -> None:
        pass


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


def healthy(port: int) -> bool:
    """The server on `port` answers /health."""
    with contextlib.suppress(httpx.HTTPError):
        return http.get(f"http://127.0.0.1:{port}/health").status_code == 200
    return False


@contextmanager
def started_by_hand(ledger: Path, port: int, stdout: IO[Any] | int) -> Iterator[int]:
    argv = [sys.executable, str(FAKE_SERVER), "m", "--port", str(port)]
    env = {**os.environ, "FAKE_LEDGER_DIR": str(ledger), "FAKE_STARTUP_S": "0.1"}
    proc = subprocess.Popen(
        argv, env=env, start_new_session=True, stdout=stdout, stderr=subprocess.STDOUT
    )
    try:
        wait_until(lambda: healthy(port), deadline_s=PROCESS_S, what="the fake server's /health")
        yield proc.pid
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
