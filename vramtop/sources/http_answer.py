"""One HTTP GET's outcome under one deadline: the answer whatever its status, or why there
was none; and a response class whose every receive gets only the time left.
"""

from __future__ import annotations

import http.client
import io
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer


# How a kept-alive connection that the server has closed in the meantime fails before any
# response arrives (RemoteDisconnected: an empty status line). Such a request is sent once
# more, on a fresh connection.
STALE_CONNECTION = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)
# The failures of a request that are answers of a kind ("the server did not answer"); any
# other exception is a bug and reported as one.
REQUEST_FAILURES = (OSError, http.client.HTTPException, ValueError)


@dataclass(frozen=True)
class Answer:
    """An HTTP answer, whatever its status."""

    status: int
    text: str
    too_large: bool = False  # the body passed MAX_BODY_BYTES: `text` is empty


# An answer, or why there was none (a timeout, a refused connection, ...).
Result = Answer | Exception


class ConnectFailed(OSError):
    """Opening the connection failed (the cause is chained): the server was not reached."""


class Deadline:
    """When the request under way must be over: every wait on the socket gets the time left."""

    def __init__(self) -> None:
        self.at = 0.0

    def left(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request ran past its deadline")
        return left


class _DeadlineReader(io.RawIOBase):
    """The socket file a response reads from, with the socket's timeout set to the time left
    before each receive: a server trickling its status line, headers or body a byte at a time
    cannot hold a request past its deadline (a plain socket timeout bounds each receive only)."""

    def __init__(self, raw: io.RawIOBase, sock: socket.socket, deadline: Deadline) -> None:
        super().__init__()
        self._raw, self._sock, self._deadline = raw, sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int | None:
        self._sock.settimeout(self._deadline.left())
        return self._raw.readinto(buffer)

    def close(self) -> None:
        if not self.closed:
            self._raw.close()  # the socket file: the socket itself is the connection's to close
        super().close()


def response_class(deadline: Deadline) -> type[http.client.HTTPResponse]:
    class _Response(http.client.HTTPResponse):
        def __init__(
            self,
            sock: socket.socket,
            debuglevel: int = 0,
            method: str | None = None,
            url: str | None = None,
        ) -> None:
            super().__init__(sock, debuglevel, method, url)
            raw = self.fp.detach()  # socket.makefile's reader, which keeps the socket open
            self.fp = io.BufferedReader(_DeadlineReader(raw, sock, deadline))

    return _Response
