"""The front door as a real process (`python -m vramtop.frontdoor`) for the tests that read it:
started in front of an upstream, waited for, and ended (SIGTERM, then SIGKILL) at the end."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from vramtop.sim.machine import free_port


@contextlib.contextmanager
def real_door(upstream_url: str, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """The door listening on a free loopback port; yields its process and base URL."""
    port = free_port()
    argv = [sys.executable, "-m", "vramtop.frontdoor", "--listen", f"127.0.0.1:{port}"]
    argv += ["--upstream", upstream_url]
    log = tmp_path / f"door-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, log.read_text()
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/vramtop/door", timeout=1).status_code == 200:
                    break
            assert time.monotonic() < deadline, "the door did not answer"
            time.sleep(0.05)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        proc.wait(5)
