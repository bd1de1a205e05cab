"""Reading a starting server: its log since the start, and whether /health answers.

What the wait for ready and the crash report read; nothing here changes the server or the
state file.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx


class LogReader:
    """New complete lines appended to the log since `offset`."""

    def __init__(self, path: Path | None, offset: int) -> None:
        self.path, self.offset, self._partial = path, offset, b""

    def read_new(self) -> list[str]:
        if self.path is None:
            return []
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        self.offset += len(data)
        data = self._partial + data
        *complete, self._partial = data.split(b"\n")
        return [line.decode("utf-8", "replace") for line in complete]


def tail(path: Path | None, offset: int, limit: int = 64 * 1024) -> list[str]:
    """The last lines (at most `limit` bytes) written since `offset`."""
    if path is None:
        return []
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(offset, size - limit))
            return fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []


def server_url(host: str | None, port: int | None) -> str:
    """Where this machine reaches a server listening on `host`:`port` (an IPv6 address in
    brackets, or the URL would not parse and /health would never answer)."""
    host = host or "127.0.0.1"
    if host in ("0.0.0.0", "::", "", "[::]", "localhost"):
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port or 8000}"


def healthy(client: httpx.Client, url: str) -> bool:
    try:
        return client.get(f"{url}/health").status_code == 200
    except httpx.HTTPError:
        return False


def client_for(
    url: str, timeout_s: float, *, trust_env: bool = True, keepalive_s: float = 5.0
) -> httpx.Client:
    """A client for the server (or the front door) at `url`. Its TLS settings only for an
    https URL: building them loads the CA bundle, some 25 to 80 ms of CPU for each client
    (each start's wait, each housekeeping step's look at the door), and the server's own
    address and the door's are plain http (`server_url`, `door.door_url`). `trust_env`:
    False to ignore proxy settings in the environment (the door's loopback control).
    `keepalive_s`: how long an idle connection is kept for the next request (httpx's own
    limits otherwise)."""
    return httpx.Client(
        timeout=timeout_s,
        verify=url.startswith("https://"),
        trust_env=trust_env,
        limits=httpx.Limits(
            max_connections=100, max_keepalive_connections=20, keepalive_expiry=keepalive_s
        ),
    )


def healthy_once(url: str, timeout_s: float = 1.0) -> bool:
    with client_for(url, timeout_s) as client:
        return healthy(client, url)
