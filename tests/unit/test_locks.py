"""Every lock vramtop takes goes through vramtop/locks.py, and a lock another process holds
is seen as held (a real second process, the kernel's own locks)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import vramtop
from tests.support.source_trees import tree_of
from vramtop import locks

PACKAGE = Path(vramtop.__file__).parent

_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_SH if sys.argv[2] == "shared" else fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()  # until the test closes it
"""


def test_only_the_locks_module_takes_locks() -> None:
    users = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "locks.py":
            continue
        for node in ast.walk(tree_of(path)):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if "fcntl" in names:
                users.append(str(path.relative_to(PACKAGE.parent)))
    assert not users, f"lock through vramtop.locks, not fcntl: {users}"


@contextmanager
def held_elsewhere(path: Path, kind: str) -> Iterator[None]:
    """Another process holds `path`'s lock (`kind`: "alone" or "shared") until the block ends."""
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None and holder.stdin is not None
        try:
            assert holder.stdout.readline().strip() == "held"
            yield
        finally:
            holder.stdin.close()
            holder.wait(timeout=60)


def _opened(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def test_a_lock_held_elsewhere_is_not_taken(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with held_elsewhere(path, "alone"):
        fd = _opened(path)
        try:
            assert not locks.try_hold(fd)
            assert not locks.try_hold(fd, shared=True)
        finally:
            os.close(fd)
    fd = _opened(path)  # the holder is gone: the kernel dropped its lock
    try:
        assert locks.try_hold(fd)
    finally:
        os.close(fd)


def test_a_shared_lock_is_shared_and_keeps_out_one_alone(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with held_elsewhere(path, "shared"):
        fd = _opened(path)
        try:
            assert not locks.try_hold(fd)
            assert locks.try_hold(fd, shared=True)
        finally:
            os.close(fd)


def test_a_held_lock_keeps_out_another_descriptor(tmp_path: Path) -> None:
    fd = _opened(tmp_path / "x.lock")
    try:
        locks.hold(fd)  # free: taken at once
        other = _opened(tmp_path / "x.lock")  # a second opening is a second holder
        try:
            assert not locks.try_hold(other)
        finally:
            os.close(other)
    finally:
        os.close(fd)
