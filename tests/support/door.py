"""The front door as a real process (`python -m vramtop.frontdoor`) for the tests that read it:
started in front of an upstream, waited for, and ended (SIGTERM, then SIGKILL) at the end."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.support import http
from tests.support.ports import free_port
from tests.support.waiting import PROCESS_S, wait_until


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

        def answering() -> bool:
            assert proc.poll() is None, log.read_text()
            with contextlib.suppress(httpx.HTTPError):
                return http.get(url + "/vramtop/door", timeout=1).status_code == 200
            return False

        wait_until(answering, deadline_s=PROCESS_S, what="the door's answer")
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        proc.wait(5)
