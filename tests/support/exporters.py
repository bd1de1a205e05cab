"""Real `vramtop export --demo --card …` processes for the fleet's tests: each on a free port
(`--listen 127.0.0.1:0`, the port read from the line it says), each with a home of its own,
waited for until its page shows a sample of a serving server."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import http
from tests.support.waiting import wait_event, wait_until

_SERVING = re.compile(r"serving http://127\.0\.0\.1:(\d+)/metrics")
LISTEN_ANY = ("--listen", "127.0.0.1:0")  # a free port, said on stderr
START_DEADLINE_S = 120.0  # a process start and the simulated server's, on a loaded machine


@dataclass
class DemoExporter:
    name: str
    card: str
    proc: subprocess.Popen[str]
    port: int | None = None
    said: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    @property
    def box(self) -> str:
        return f"{self.name}={self.url}"

    def page(self) -> str:
        return http.get(self.url, timeout=10).text

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


def _start(tmp_path: Path, name: str, card: str) -> DemoExporter:
    env = dict(os.environ, VRAMTOP_HOME=str(tmp_path / f"home-{name}"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "vramtop", "export", "--demo", "--card", card, *LISTEN_ANY],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    return DemoExporter(name, card, proc)


def _read_port(exporter: DemoExporter) -> None:
    """Reads the exporter's lines (in a thread of its own) and sets its port when said."""
    found = threading.Event()

    def read() -> None:
        assert exporter.proc.stderr is not None
        for line in exporter.proc.stderr:
            exporter.said.append(line)
            match = _SERVING.search(line)
            if match and exporter.port is None:
                exporter.port = int(match.group(1))
                found.set()

    threading.Thread(target=read, daemon=True).start()
    wait_event(
        found,
        deadline_s=START_DEADLINE_S,
        what=lambda: f"{exporter.name}'s exporter to serve; it said {''.join(exporter.said)!r}",
    )


def serving(page: str) -> bool:
    """The page holds a sample of a server that runs and has its KV pool in use."""
    return (
        "vramtop_last_sample_timestamp_seconds" in page and "vramtop_kv_cache_usage_ratio" in page
    )


@contextmanager
def demo_exporters(tmp_path: Path, boxes: dict[str, str]) -> Iterator[list[DemoExporter]]:
    """One exporter per `name: card`, started together, each serving once this yields."""
    started = [_start(tmp_path, name, card) for name, card in boxes.items()]
    try:
        for exporter in started:
            _read_port(exporter)
        for exporter in started:
            wait_until(
                lambda exporter=exporter: serving(exporter.page()),  # type: ignore[misc]
                deadline_s=START_DEADLINE_S,
                what=f"{exporter.name}'s page with its serving server",
            )
        yield started
    finally:
        for exporter in started:
            exporter.stop()
