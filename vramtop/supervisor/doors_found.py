"""Front doors found on the machine, any profile's, as `attach` meets them: the door a pid
is (`door_process`), the doors in front of a server's port (`doors_in_front_of`), and the
profile whose token file a door was started with."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil

from vramtop.frontdoor.protocol import PREFIX as CONTROL
from vramtop.supervisor import door
from vramtop.supervisor.readiness import client_for


@dataclass(frozen=True)
class FoundDoor:
    """A process that is a vramtop front door (any profile's), as `attach` meets it on the
    machine (its own `DoorProcess` is what a profile's door control starts and stops)."""

    pid: int
    address: str  # where it listens (HOST:PORT)
    # The port of the vLLM server it sends requests to now; None: none (it holds them).
    upstream_port: int | None
    # The token file it was started with: its profile's (`token_path`); None: not named.
    token_file: str | None = None

    def of_profile(self, profile: str) -> bool:
        """Whether this door is `profile`'s: started with that profile's token."""
        return self.token_file == str(door.token_path(profile))


def door_process(pid: int) -> FoundDoor | None:
    """The front door `pid` is, as its command line says (the door's module, `--listen`),
    with the server behind it as the door itself answers (else as its command line named it
    at its start); None for any other process."""
    try:
        argv = psutil.Process(pid).cmdline()
    except psutil.Error:
        return None
    if not door.is_door_command(argv):
        return None
    address, upstream = _option(argv, "--listen"), _option(argv, "--upstream")
    if address is None:
        return None
    with contextlib.suppress(httpx.HTTPError, ValueError, RecursionError):
        url = door.door_url(address)
        with client_for(url, 1.0, trust_env=False) as client:
            answer = client.get(url + CONTROL).json()
        if isinstance(answer, dict) and answer.get("pid") == pid:
            told = answer.get("upstream")
            upstream = told if isinstance(told, str) else None
    port = urlsplit(upstream).port if upstream else None
    return FoundDoor(pid, address, port, _option(argv, "--token-file"))


def doors_in_front_of(port: int) -> list[FoundDoor]:
    """The front doors (any profile's) that send their requests to the server on `port`."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        argv = proc.info.get("cmdline") or []
        if door.is_door_command(argv):
            front = door_process(proc.pid)
            if front is not None and front.upstream_port == port:
                found.append(front)
    return found


def profile_of_token_file(path: str | None) -> str | None:
    """The profile (as its files name it) whose door token `path` is; None for another."""
    name = Path(path).name if path else ""
    prefix, suffix = "door-", ".token"
    if name.startswith(prefix) and name.endswith(suffix):
        return name[len(prefix) : -len(suffix)] or None
    return None


def _option(argv: list[str], name: str) -> str | None:
    index = argv.index(name) if name in argv else len(argv)
    return argv[index + 1] if index + 1 < len(argv) else None
