"""The exporter's HTTP server: a few worker threads whatever the number of connections.

prometheus_client's own server starts a thread per connection and lets it wait for a request
for as long as the client keeps the socket open: 800 idle sockets held 800 threads. Here one
thread accepts and watches every open connection with a selector, and reads each request's
head (its line and headers) as it arrives, without blocking; a connection is handed to one of
`workers` threads only once its whole head is in. So a client that sends half a request holds
no worker: 50 of them once kept every worker waiting and a scrape behind them. A connection
whose head is not in within `idle_timeout_s` of its opening is closed, a head over
`MAX_HEAD_BYTES` too, and past `max_connections` the longest-open one is closed to make
room, so a scraper still gets in. A worker answers with prometheus_client's own handler (the
text or OpenMetrics format, gzip, `name[]` filters) and closes the connection, as that
handler does (HTTP/1.0).
"""

from __future__ import annotations

import contextlib
import io
import selectors
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import IO

from prometheus_client.exposition import MetricsHandler
from prometheus_client.registry import Collector

WORKERS = 4
IDLE_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 64
# A scrape's request line and headers are a few hundred bytes.
MAX_HEAD_BYTES = 16 * 1024
_END_OF_HEAD = (b"\r\n\r\n", b"\n\n")
_TICK_S = 0.5  # how often idle connections are looked at


class MetricsServer:
    """Serves `registry` on `host:port` (port 0: any free one) once `start` is called."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: Collector,
        *,
        workers: int = WORKERS,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        self._listener = socket.socket(family, kind, proto)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind(address)
            self._listener.listen(128)
            self._listener.setblocking(False)
        except OSError:
            self._listener.close()
            raise
        self.server_port: int = self._listener.getsockname()[1]
        self._handler = _handler_for(registry, idle_timeout_s)
        self._idle_timeout_s = idle_timeout_s
        self._max_connections = max(1, max_connections)
        self._monotonic = monotonic
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vramtop-http")
        self._selector = selectors.DefaultSelector()
        self._waker_r, self._waker_w = socket.socketpair()
        self._waker_r.setblocking(False)
        # Connections waiting for their request: socket -> when it was accepted; and what
        # came of their request's head so far.
        self._idle: dict[socket.socket, float] = {}
        self._heads: dict[socket.socket, bytearray] = {}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def open_connections(self) -> int:
        """Connections accepted and waiting for their request (not those being answered)."""
        return len(self._idle)

    def start(self) -> None:
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._waker_r, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._loop, name="vramtop-http-accept", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        """Stop accepting, close every waiting connection, let the answers under way finish."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._waker_w.send(b"x")
        if self._thread is not None:
            self._thread.join(5.0)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def server_close(self) -> None:
        for sock in (self._listener, self._waker_r, self._waker_w):
            sock.close()
        self._selector.close()

    # --- the accepting thread ------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stopping.is_set():
            for key, _ in self._selector.select(_TICK_S):
                sock = key.fileobj
                if sock is self._waker_r:
                    continue
                if sock is self._listener:
                    self._accept()
                else:
                    assert isinstance(sock, socket.socket)
                    self._read_head(sock)
            self._close_idle()
        for sock in list(self._idle):
            self._drop(sock)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # out of descriptors, or the listener closed: try again next tick
            if len(self._idle) >= self._max_connections:
                oldest = min(self._idle, key=self._idle.__getitem__)
                self._drop(oldest)
            conn.setblocking(False)
            self._idle[conn] = self._monotonic()
            self._selector.register(conn, selectors.EVENT_READ)

    def _read_head(self, conn: socket.socket) -> None:
        """What arrived of its request; handed to a worker once the head is whole."""
        try:
            data = conn.recv(MAX_HEAD_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        head = self._heads.setdefault(conn, bytearray())
        head += data
        if not data or len(head) > MAX_HEAD_BYTES:
            self._drop(conn)  # gone, or no scrape
        elif any(end in head for end in _END_OF_HEAD):
            self._hand_over(conn, bytes(head))

    def _hand_over(self, conn: socket.socket, head: bytes) -> None:
        """Its request's head is in: a worker answers it."""
        self._selector.unregister(conn)
        self._idle.pop(conn, None)
        self._heads.pop(conn, None)
        try:
            self._pool.submit(self._answer, conn, head)
        except RuntimeError:  # shutting down
            conn.close()

    def _close_idle(self) -> None:
        deadline = self._monotonic() - self._idle_timeout_s
        for conn, since in list(self._idle.items()):
            if since <= deadline:
                self._drop(conn)

    def _drop(self, conn: socket.socket) -> None:
        self._idle.pop(conn, None)
        self._heads.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)
        conn.close()

    # --- a worker ----------------------------------------------------------------------------
    def _answer(self, conn: socket.socket, head: bytes) -> None:
        try:
            conn.setblocking(True)
            self._handler(conn, conn.getpeername(), self, head)
        except OSError:
            pass  # the client went away
        finally:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()


# A handler made for one connection: (the socket, its peer, this server, the head read).
_Handler = Callable[[socket.socket, object, object, bytes], object]


def _handler_for(registry: Collector, timeout_s: float) -> _Handler:
    """prometheus_client's handler for `registry`, reading the request from the head the
    accepting thread read, writing for at most `timeout_s` (StreamRequestHandler's
    `timeout`)."""
    base: type = MetricsHandler.factory(registry)

    class _FromHead(base):  # type: ignore[misc]
        timeout = timeout_s
        rfile: IO[bytes]

        def __init__(
            self, request: socket.socket, client_address: object, server: object, head: bytes
        ) -> None:
            self._head = head
            super().__init__(request, client_address, server)

        def setup(self) -> None:
            super().setup()
            self.rfile.close()  # the socket's own reader: the head was read already
            self.rfile = io.BytesIO(self._head)

    return _FromHead
