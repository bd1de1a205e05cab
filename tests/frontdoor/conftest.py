"""The front door as a real process (`python -m vramtop.frontdoor`), in front of a simulated
vLLM or a small test upstream; every process is ended at the test's end."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

# The simulated machine's fixtures, as the sim tests use them.
from tests.sim.conftest import home, machine, machine_factory, server_factory
from tests.support import http
from tests.support.ports import free_port
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.frontdoor import protocol

__all__ = ["home", "machine", "machine_factory", "server_factory"]

TOKEN = "door-test-token-5f2c"


class Door:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path, token: str) -> None:
        self.proc = proc
        self.port = port
        self.log = log
        self.token = token
        self.url = f"http://127.0.0.1:{port}"

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout_s: float = PROCESS_S) -> Door:

        def answering() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"the door exited {self.proc.returncode}:\n{self.text()}")
            with contextlib.suppress(httpx.HTTPError):
                return http.get(self.url + protocol.PREFIX, timeout=1).status_code == 200
            return False

        wait_until(answering, deadline_s=timeout_s, what=lambda: f"the door:\n{self.text()}")
        return self

    def status(self) -> dict[str, Any]:
        answer: dict[str, Any] = http.get(self.url + protocol.PREFIX, timeout=5).json()
        return answer

    def post(
        self, route: str, body: dict[str, Any], token: str | None = None, timeout: float = 30
    ) -> httpx.Response:
        return http.post(
            self.url + route,
            json=body,
            headers={protocol.TOKEN_HEADER: self.token if token is None else token},
            timeout=timeout,
        )

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


@pytest.fixture
def door_factory(tmp_path: Path) -> Iterator[Any]:
    doors: list[Door] = []

    def start(upstream: str | None, *extra: str, token: str | None = TOKEN) -> Door:
        port = free_port()
        argv = [sys.executable, "-m", "vramtop.frontdoor", "--listen", f"127.0.0.1:{port}"]
        if upstream is not None:
            argv += ["--upstream", upstream]
        if token is not None:
            token_file = tmp_path / f"door{len(doors)}.token"
            fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(token + "\n")
            argv += ["--token-file", str(token_file)]
        log = tmp_path / f"door{len(doors)}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv + list(extra), stdout=out, stderr=subprocess.STDOUT)
        door = Door(proc, port, log, token or "")
        doors.append(door)
        return door.wait_ready()

    yield start
    for door in doors:
        with contextlib.suppress(ProcessLookupError):
            door.proc.kill()
        door.proc.wait(5)


@pytest.fixture
def sim_server(machine: Any, server_factory: Any) -> Any:
    server = server_factory(machine, 0.93)
    assert server.wait_ready()
    return server
