"""Fixtures that run the simulated machine as real processes and always clean them up."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import http
from tests.support.ports import free_port
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.sim.machine import SimMachine


class RunningServer:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc = proc
        self.port = port
        self.log = log
        self.url = f"http://127.0.0.1:{port}"

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout_s: float = PROCESS_S) -> bool:
        """True once /health answers 200; False if the process exited first."""

        def ready_or_exited() -> bool:
            if self.proc.poll() is not None:
                return True
            with contextlib.suppress(httpx.HTTPError):
                return http.get(self.url + "/health", timeout=0.5).status_code == 200
            return False

        wait_until(
            ready_or_exited,
            deadline_s=timeout_s,
            what=lambda: f"the server ready:\n{self.text()[-2000:]}",
        )
        return self.proc.poll() is None

    def kill_group(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    return tmp_path


@pytest.fixture
def machine_factory(home: Path) -> Iterator[Any]:
    machines: list[SimMachine] = []

    def make(**kw: Any) -> SimMachine:
        kw.setdefault("startup_s", 0.3)
        m = SimMachine(home / f"sim{len(machines)}", **kw).start()
        machines.append(m)
        return m

    yield make
    for m in machines:
        m.stop()


@pytest.fixture
def machine(machine_factory: Any) -> SimMachine:
    return machine_factory(speed=1.0)


@pytest.fixture
def server_factory(home: Path) -> Iterator[Any]:
    servers: list[RunningServer] = []

    def start(
        m: SimMachine,
        util: float = 0.93,
        argv: list[str] | None = None,
        env: dict[str, str] | None = None,
        **flags: Any,
    ) -> RunningServer:
        port = free_port()
        log = home / f"server{len(servers)}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                argv or m.server_argv(util, port=port, **flags),
                env=env or m.server_env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        s = RunningServer(proc, port, log)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.kill_group()
