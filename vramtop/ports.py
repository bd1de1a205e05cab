"""Loopback ports for servers vramtop chooses a port for and that bind it later.

A port chosen by binding to 0 comes from the machine's ephemeral range, the range every
outgoing connection takes its local port from. vLLM binds the port it is given after tens of
seconds of imports; meanwhile any connection on the machine can take that port, and vLLM
fails with "Address already in use". So the ports chosen here lie below that range, from
CHOSEN_FROM up, picked at random among the free ones (two vramtops choosing at once rarely
meet) and checked free when chosen.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Collection
from pathlib import Path

LOOPBACK = "127.0.0.1"
# Where the ephemeral ports begin when /proc does not say (Linux's default).
EPHEMERAL_FLOOR = 32768
# The ports chosen here start at 20000: above the ports services are usually given.
CHOSEN_FROM = 20_000
# How many ports are tried before falling back to the kernel's choice.
_TRIES = 200


def ephemeral_floor(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """The first port of the range outgoing connections take their local port from."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return EPHEMERAL_FLOOR


def is_free(port: int, host: str = LOOPBACK) -> bool:
    """Nothing holds `port` on `host` right now (it can be bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(avoid: Collection[int] = (), *, floor: int | None = None) -> int:
    """A loopback TCP port nothing holds now, below the ephemeral range and not in `avoid`.
    Where that range starts too low to leave room below it, the kernel's choice."""
    top = ephemeral_floor() if floor is None else floor
    width = top - CHOSEN_FROM
    if width >= 1000:
        start = random.randrange(width)
        for offset in range(_TRIES):
            port = CHOSEN_FROM + (start + offset) % width
            if port not in avoid and is_free(port):
                return port
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((LOOPBACK, 0))
            port = int(s.getsockname()[1])
        if port not in avoid:
            return port
