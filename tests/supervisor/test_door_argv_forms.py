"""A front door is told by one rule, whatever its interpreter's options: a door started by
hand or by a unit (`python -X utf8 -m vramtop.frontdoor`, `-mvramtop.frontdoor`, several
options) is found by attach (`doors_found`: at its port, in front of the server), adopted with
a lost state file's server (`adopt`), and ended by a stop (`is_door_of`); the shell that
started one is never taken for it. Before, these were three rules (the module among the first
four words, or in their joined text) that disagreed."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from supervisor_helpers import fake_profile, started_by_hand

from tests.support import http
from tests.support.ports import free_port
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.frontdoor.protocol import PREFIX as CONTROL
from vramtop.supervisor import Supervisor, door, doors_found, state

PY = sys.executable
SHELL = "a shell that starts it"
FORMS = {
    "as vramtop spawns it": [PY, "-m", door.MODULE],
    "-X utf8": [PY, "-X", "utf8", "-m", door.MODULE],
    "several options": [PY, "-u", "-X", "dev", "-W", "ignore", "-B", "-m", door.MODULE],
    "module joined to -m": [PY, f"-m{door.MODULE}"],
    SHELL: [
        "sh",
        "-c",
        f'{shlex.quote(PY)} -X utf8 -m {door.MODULE} "$@"; :',
        "sh",
    ],
}


@contextlib.contextmanager
def door_by_hand(interpreter: list[str], address: str, upstream: int) -> Iterator[tuple[int, int]]:
    """The profile "own"'s door started as a person or a unit would, with `interpreter`
    before its options; yields the pid that answers on `address` (the door itself) and the
    pid of the process started (a shell's, where a shell starts it)."""
    door.token("own")
    argv = [*interpreter, "--listen", address, "--upstream", door.upstream_url(upstream)]
    argv += ["--token-file", str(door.token_path("own"))]
    proc = subprocess.Popen(
        argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = door.door_url(address)

    def answering() -> int | None:
        assert proc.poll() is None, f"the door exited: {argv}"
        with contextlib.suppress(httpx.HTTPError, ValueError):
            pid = http.get(url + CONTROL, timeout=1).json().get("pid")
            return pid if isinstance(pid, int) else None
        return None

    try:
        yield (
            wait_until(answering, deadline_s=PROCESS_S, what=f"the door's answer on {address}"),
            proc.pid,
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.mark.parametrize("form", FORMS)
def test_a_door_started_by_hand_is_one_door_to_attach_adopt_and_stop(
    home: Path, ledger: Path, form: str
) -> None:
    port, door_port = free_port(), free_port()
    address = f"127.0.0.1:{door_port}"
    profile = fake_profile("own", port, ledger).model_copy(update={"front_door": address})
    with (
        started_by_hand(ledger, port, subprocess.DEVNULL) as server_pid,
        door_by_hand(FORMS[form], address, port) as (door_pid, started_pid),
    ):
        found = doors_found.door_process(door_pid)
        assert found is not None, psutil.Process(door_pid).cmdline()
        assert (found.address, found.upstream_port) == (address, port)
        assert found.of_profile("own") and door.is_door_of(door_pid, "own")
        assert doors_found.doors_in_front_of(port) == [found]  # never the shell too
        if form == SHELL:  # the shell stayed, the door its child: the shell is no door
            assert started_pid != door_pid
            assert doors_found.door_process(started_pid) is None
            assert not door.is_door_of(started_pid, "own")
        # A lost state file's server, rebuilt: its door found again where it listens.
        rebuilt = state.ServerRecord(profile="own", port=port)
        door.adopt(rebuilt, profile)
        assert (rebuilt.front_door, rebuilt.door_pid) == (address, door_pid)
        # attach at the door: named, and adopted with the server behind it.
        result = Supervisor(profile).attach(port=door_port)
        assert result.ok, result.message
        assert result.message.startswith(
            f"port {door_port} is vramtop's front door (pid {door_pid}, on {address}), not "
            f"vLLM; the vLLM server behind it listens on port {port}: attached to pid "
            f"{server_pid} on port {port}"
        )
        assert "is this profile's and is kept with it" in result.message
        rec = state.load("own")
        assert rec is not None and (rec.door_pid, rec.internal_port) == (door_pid, port)
        # The stop ends it (its command line says it is this profile's door).
        door.stop(rec)
        assert not door.alive(rec)
