"""Ports for the tests' servers, one allocator for the whole suite.

A port chosen by binding to 0 comes from this machine's ephemeral range, the range every
outgoing connection also takes its local port from. Between the choice and the moment the
server binds it (vLLM binds after tens of seconds of imports), another test's connection can
take it, and the server fails with "Address already in use"; and a port freed by one test can
be handed to the next while a reader of the first still asks it. Here each xdist worker walks
its own slice of the ports below the ephemeral range, in order: no connection takes one by
chance, no two tests in a run are given the same one, and what is handed out is checked free.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading

from vramtop.sim.machine import ephemeral_floor

# Below the product's own choices for the demo (vramtop.sim.machine.free_port) and above
# the ports services usually hold.
LOW = 10_000
HIGH = 20_000


def _slice() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker) if worker.isdigit() else 0
    high = min(HIGH, ephemeral_floor())
    width = max((high - LOW) // max(count, 1), 1)
    start = LOW + (index % max(count, 1)) * width
    return range(start, start + width)


_lock = threading.Lock()
_walk = itertools.cycle(_slice())


def free_port() -> int:
    """A loopback TCP port nothing listens on, given to no other test of this run."""
    with _lock:
        for _ in range(len(_slice())):
            port = next(_walk)
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue  # held by something else on this machine: the next one
            return port
    raise AssertionError("no free port left in this worker's slice")
