"""The simulated GPU's wire protocol: one JSON request line in, one JSON response line out.

Every request is an object with an `op` field; every response has `ok` and, when `ok` is
false, an `error` sentence. A connection may carry several requests in turn.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any, Protocol

from vramtop.core.json_types import JsonValue

SOCKET_ENV = "VRAMTOP_SIM_SOCKET"
SPEED_ENV = "VRAMTOP_SIM_SPEED"
STARTUP_ENV = "VRAMTOP_SIM_STARTUP_S"
# The agent's API key (not on its command line, where `ps` shows it).
LOAD_API_KEY_ENV = "VRAMTOP_LOAD_API_KEY"
# The world daemon's exit status when another simulated GPU already serves its socket.
ALREADY_SERVED = 3


class WorldUnreachable(Exception):
    """The world daemon's socket is missing, refused the connection or did not answer."""


class WorldRequests(Protocol):
    """What answers the world's requests: `WorldClient` over the socket, or the `World` itself
    where a test runs a server's parts in its own process."""

    def request(self, op: str, **fields: JsonValue) -> dict[str, Any]: ...


# How long the simulated server and engine wait for the world daemon's answer. A daemon
# that is gone fails at once (no socket, connection refused); this wait is for one that is
# there but slow, on a loaded machine, where a real vLLM would wait on its GPU rather than
# exit. The console's probes pass a short wait of their own.
WORLD_ANSWER_S = 15.0


class WorldClient:
    """A small blocking client; opens one connection per request (robust across restarts)."""

    def __init__(self, socket_path: str | Path, timeout_s: float = WORLD_ANSWER_S) -> None:
        self.socket_path = str(socket_path)
        self.timeout_s = timeout_s

    def request(self, op: str, **fields: JsonValue) -> dict[str, Any]:
        """Send one request; raise WorldUnreachable when the daemon cannot be asked."""
        line = json.dumps({"op": op, **fields}).encode() + b"\n"
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(self.timeout_s)
                sock.connect(self.socket_path)
                sock.sendall(line)
                reply = _read_line(sock)
        except OSError as exc:
            raise WorldUnreachable(f"{self.socket_path}: {exc.strerror or exc}") from exc
        if not reply:
            raise WorldUnreachable(f"{self.socket_path}: closed without an answer")
        try:
            answer = json.loads(reply)
        except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
            raise WorldUnreachable(f"{self.socket_path}: unreadable answer") from exc
        if not isinstance(answer, dict):
            raise WorldUnreachable(f"{self.socket_path}: unexpected answer")
        return answer


def _read_line(sock: socket.socket) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            break
    return b"".join(chunks).strip()
