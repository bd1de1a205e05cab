"""Fake executables for the senders (each saves its argv, stdin, working directory and
environment, or hangs with a child of its own) and a finding to tell of."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import psutil

from tests.support.waiting import PROCESS_S, wait_until
from vramtop.core.findings import Finding

# Each call saved whole (through a rename) under a name that sorts by the time of the call:
# fakes may run side by side.
SAVING = """#!{python}
import json, os, sys, time
data = sys.stdin.buffer.read() if not sys.stdin.isatty() else b""
name = "call-%020d-%d.json" % (time.monotonic_ns(), os.getpid())
with open(os.path.join({out!r}, "." + name), "w") as f:
    json.dump({{"argv": sys.argv, "stdin": data.decode("latin-1"), "cwd": os.getcwd(),
               "env": {{k: v for k, v in os.environ.items() if k.startswith("VRAMTOP_")}}}}, f)
os.replace(os.path.join({out!r}, "." + name), os.path.join({out!r}, name))
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""


# A program that never ends: a shell waiting on its own `sleep` (a grandchild of vramtop's),
# which first saves "SHELL_PID SLEEP_PID" (whole, through a rename). With `ignore_term`, both
# ignore SIGTERM: only SIGKILL ends them.
HANGING = """#!/bin/sh
{trap}
sleep 1000 &
echo "$$ $!" > "{out}/.pids.$$" && mv "{out}/.pids.$$" "{out}/hung-$$.pids"
wait
"""

T = TypeVar("T")


def wait_for(check: Callable[[], T], what: str, timeout_s: float = PROCESS_S) -> T:
    """`check()`'s first true value, asked until `timeout_s` has passed."""
    return wait_until(check, deadline_s=timeout_s, what=what)


def running(pid: int) -> bool:
    """`pid` is a process that has not ended (a zombie has)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class Fakes:
    def __init__(self, tmp_path: Path) -> None:
        self.bin = tmp_path / "bin"
        self.out = tmp_path / "calls"
        self.bin.mkdir()
        self.out.mkdir()

    def install(self, name: str) -> Path:
        path = self.bin / name
        path.write_text(SAVING.format(python=sys.executable, out=str(self.out)))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return path

    def install_hanging(self, name: str, *, ignore_term: bool = False) -> Path:
        path = self.bin / name
        trap = "trap '' TERM" if ignore_term else ""
        path.write_text(HANGING.format(trap=trap, out=str(self.out)))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return path

    def calls(self) -> list[dict[str, object]]:
        return [json.loads(p.read_text()) for p in sorted(self.out.glob("call-*.json"))]

    def hung(self) -> list[tuple[int, int]]:
        """(shell pid, its sleep's pid) of each hanging fake started so far."""
        found = (p.read_text().split() for p in sorted(self.out.glob("hung-*.pids")))
        return [(int(shell), int(child)) for shell, child in found]


def end_hung(fakes: Fakes) -> None:
    """End what hanging fakes are left (a test that failed half-way; code that did not put
    them in a group of their own)."""
    for shell, child in fakes.hung():
        for pid in (shell, child):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def contention(t: float = 12.0, **evidence: object) -> Finding:
    from vramtop.core.findings import Evidence

    values = {"generation_tps": 7.2, "baseline_generation_tps": 77.0, **evidence}
    return Finding(
        kind="vram_contention",
        severity="critical",
        first_seen_t=t,
        last_seen_t=t,
        closed_t=None,
        summary="Generation fell to 7.2 tok/s: the desktop is squeezing vLLM's memory.",
        evidence=Evidence(values),
    )
