"""The exporter's HTTP server: a few worker threads whatever the number of connections.

prometheus_client's own server starts a thread per connection and lets it wait for a request
for as long as the client keeps the socket open: 800 idle sockets held 800 threads. Here one
thread accepts and watches every open connection with a selector; a connection is handed to
one of `workers` threads only once its request has begun to arrive, a connection idle for
`idle_timeout_s` is closed, and past `max_connections` the longest idle one is closed to make
room, so a scraper still gets in. A worker reads the request with the same timeout (a client
that sends half a request holds it that long, no longer), answers it with prometheus_client's
own handler (the text or OpenMetrics format, gzip, `name[]` filters) and closes the
connection, as that handler does (HTTP/1.0).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prometheus_client.exposition import MetricsHandler
from prometheus_client.registry import Collector

WORKERS = 4
IDLE_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 64
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
        self._handler: type[Any] = _handler_for(registry, idle_timeout_s)
        self._idle_timeout_s = idle_timeout_s
        self._max_connections = max(1, max_connections)
        self._monotonic = monotonic
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vramtop-http")
        self._selector = selectors.DefaultSelector()
        self._waker_r, self._waker_w = socket.socketpair()
        self._waker_r.setblocking(False)
        # Connections waiting for their request: socket -> when it was accepted.
        self._idle: dict[socket.socket, float] = {}
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
                    self._hand_over(sock)
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

    def _hand_over(self, conn: socket.socket) -> None:
        """Its request is arriving: a worker reads and answers it."""
        self._selector.unregister(conn)
        self._idle.pop(conn, None)
        try:
            self._pool.submit(self._answer, conn)
        except RuntimeError:  # shutting down
            conn.close()

    def _close_idle(self) -> None:
        deadline = self._monotonic() - self._idle_timeout_s
        for conn, since in list(self._idle.items()):
            if since <= deadline:
                self._drop(conn)

    def _drop(self, conn: socket.socket) -> None:
        self._idle.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)
        conn.close()

    # --- a worker ----------------------------------------------------------------------------
    def _answer(self, conn: socket.socket) -> None:
        try:
            conn.setblocking(True)
            self._handler(conn, conn.getpeername(), self)
        except OSError:
            pass  # the client went away
        finally:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()


def _handler_for(registry: Collector, timeout_s: float) -> type[Any]:
    """prometheus_client's handler for `registry`, reading a request for at most `timeout_s`
    (StreamRequestHandler's `timeout`) and logging nothing."""
    handler: type[Any] = MetricsHandler.factory(registry)
    handler.timeout = timeout_s
    return handler
