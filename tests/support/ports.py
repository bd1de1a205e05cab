"""Ports for the tests' servers, one allocator for the whole suite.

A port chosen by binding to 0 comes from this machine's ephemeral range, the range every
outgoing connection also takes its local port from. Between the choice and the moment the
server binds it (vLLM binds after tens of seconds of imports), another test's connection can
take it, and the server fails with "Address already in use"; and a port freed by one test can
be handed to the next while a reader of the first still asks it.

Here the ports below the ephemeral range are cut into slices, and each test process (an xdist
worker) claims one for as long as it lives, with a lock file no other process on this machine
can hold at the same time (another run of the suite beside this one included). It walks its
slice in order: no connection takes a port by chance, no two tests are given the same one, and
what is handed out is checked free.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from vramtop.ports import ephemeral_floor, is_free

# Below the product's own choices for the demo (vramtop.ports.free_port) and above
# the ports services usually hold.
LOW = 10_000
HIGH = 20_000
SLICES = 16


def slice_range(number: int) -> range:
    """The ports of slice `number`."""
    width = (min(HIGH, ephemeral_floor()) - LOW) // SLICES
    return range(LOW + number * width, LOW + (number + 1) * width)


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    return int(worker) if worker.isdigit() else 0


def claim_slice(first: int, lock_dir: Path) -> tuple[int, int] | None:
    """The first slice from `first` on that no other process holds, and the descriptor of its
    held lock (closing it gives the slice back); None when every slice is held."""
    for step in range(SLICES):
        number = (first + step) % SLICES
        try:
            fd = os.open(
                lock_dir / f"vramtop-test-ports-{number}.lock",
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW,
                0o600,
            )
        except OSError:
            continue  # another user's file, or a link (never followed): not this slice
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # another test process holds it
        return number, fd
    return None


_lock = threading.Lock()
_walk: Iterator[int] | None = None
_ports: range | None = None


def claimed() -> range:
    """This process's slice, claimed at its first use and held until it exits."""
    global _walk, _ports
    with _lock:
        if _ports is None:
            held = claim_slice(_worker_index(), Path(tempfile.gettempdir()))
            # Every slice held (more than SLICES test processes at once): share by worker.
            _ports = slice_range(held[0] if held else _worker_index() % SLICES)
            _walk = itertools.cycle(_ports)
        return _ports


def free_port() -> int:
    """A loopback TCP port nothing listens on, given to no other test of this run."""
    ports = claimed()
    with _lock:
        assert _walk is not None
        for _ in range(len(ports)):
            port = next(_walk)
            if is_free(port):
                return port  # else held by something else on this machine: the next one
    raise AssertionError("no free port left in this process's slice")
