"""The load generator plays an agent against the fake server, in-process and as a command."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from vramtop.sim.load import LoadGenerator


def test_load_generator_streams_requests(machine_factory: Any, server_factory: Any) -> None:
    m = machine_factory(speed=20.0)
    s = server_factory(m, 0.93, api_key="k")
    assert s.wait_ready()
    gen = LoadGenerator(s.url, concurrency=2, api_key="k", pause_s=(0.01, 0.05)).start()
    deadline = time.monotonic() + 20
    while gen.completed < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    gen.stop()
    assert gen.completed >= 2 and gen.tokens > 0 and gen.errors == 0
    out = subprocess.run(
        [sys.executable, "-m", "vramtop.sim.load", "--url", s.url, "--api-key", "k",
         "--requests", "1"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 0 and "load: 1 requests" in out.stdout


def test_machine_start_load_and_stop(machine_factory: Any, server_factory: Any) -> None:
    m = machine_factory(speed=20.0)
    s = server_factory(m, 0.93)
    assert s.wait_ready()
    m.start_load(s.url, concurrency=1)
    deadline = time.monotonic() + 20
    while m.load is not None and m.load.completed < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert m.load is not None and m.load.completed >= 1
    m.stop_load()
    assert m.load is None
