"""Idle connections against the exporter's HTTP server: threads before and after, and whether
a scrape still answers, for prometheus_client's own server (a thread per connection, the
baseline) and vramtop's (`vramtop.export.http_server`: an accepting thread and a few workers).

    python -m bench.bench_export_connections --sockets 800

Prints, per server: the process's threads before, with the idle sockets open, and how long
a scrape took meanwhile; then the ratio of the threads the idle sockets added.
"""

from __future__ import annotations

import argparse
import resource
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from vramtop.export.http_server import MetricsServer


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Gauge("bench_value", "a value", registry=registry).set(1)
    return registry


def _baseline(registry: CollectorRegistry) -> tuple[int, Callable[[], None]]:
    httpd, _ = start_http_server(0, addr="127.0.0.1", registry=registry)

    def close() -> None:
        httpd.shutdown()
        httpd.server_close()

    return httpd.server_port, close


def _vramtop(registry: CollectorRegistry) -> tuple[int, Callable[[], None]]:
    server = MetricsServer("127.0.0.1", 0, registry)
    server.start()

    def close() -> None:
        server.shutdown()
        server.server_close()

    return server.server_port, close


def measure(name: str, serve: Callable[[CollectorRegistry], Any], sockets: int) -> int:
    before = threading.active_count()
    port, close = serve(_registry())
    serving = threading.active_count()
    idle: list[socket.socket] = []
    refused = 0
    try:
        for _ in range(sockets):
            try:
                idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError:
                refused += 1  # the listen backlog full: the server did not accept in time
        time.sleep(1.0)  # let the server accept them all
        during = threading.active_count()
        began = time.monotonic()
        try:
            answered = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).status_code
            scrape = f"scrape {time.monotonic() - began:.3f} s (HTTP {answered})"
        except httpx.HTTPError as exc:
            scrape = f"scrape failed after {time.monotonic() - began:.1f} s: {exc!r}"
    finally:
        for sock in idle:
            sock.close()
        close()
    print(
        f"{name:<18} threads: {before} before, {serving} serving, {during} with "
        f"{len(idle)} idle sockets (+{during - serving}; {refused} not connected); {scrape}",
        flush=True,
    )
    return during - serving


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sockets", type=int, default=800)
    args = parser.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, max(soft, 2 * args.sockets + 256))
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    old = measure("prometheus_client", _baseline, args.sockets)
    new = measure("vramtop", _vramtop, args.sockets)
    print(f"threads added by {args.sockets} idle sockets: {old} against {new}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
