"""Which module a Python command line runs (`python [options] -m MODULE …`): one rule for every
process vramtop tells by its command line, read as CPython reads its own options."""

from __future__ import annotations

import pytest

from vramtop.core.module_run import ModuleRun, module_run
from vramtop.supervisor import door

DOOR = "vramtop.frontdoor"
LISTEN = ["--listen", "127.0.0.1:8000"]


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (["python", "-m", DOOR, *LISTEN], 3),  # as vramtop spawns it (sys.executable)
        (["/usr/bin/python3", "-m", DOOR, *LISTEN], 3),
        (["/opt/env/bin/python3.12", "-u", "-m", DOOR, *LISTEN], 4),
        (["python", "-X", "utf8", "-m", DOOR, *LISTEN], 5),
        (["python", "-Xutf8", "-m", DOOR, *LISTEN], 4),
        (["python3", "-u", "-X", "dev", "-W", "ignore", "-B", "-m", DOOR, *LISTEN], 9),
        (["python", "-mvramtop.frontdoor", *LISTEN], 2),
        (["python", "-Im", DOOR, *LISTEN], 3),
        (["python", "-uBm", DOOR], 3),
        (["python", "--check-hash-based-pycs", "never", "-m", DOOR], 5),
        (["python3.13t", "-m", DOOR], 3),
        (["pypy3", "-m", DOOR], 3),
        (["/usr/bin/python3.12-dbg", "-m", DOOR], 3),
    ],
)
def test_a_door_is_told_with_any_interpreter_options(argv: list[str], start: int) -> None:
    assert module_run(argv) == ModuleRun(DOOR, start)
    assert door.is_door_command(argv)


@pytest.mark.parametrize(
    "argv",
    [
        # The shell that starts a door is not the door (its one argument names the module).
        ["sh", "-c", f"python -m {DOOR} --listen 127.0.0.1:8000"],
        ["/bin/bash", "-c", f"exec python3 -X utf8 -m {DOOR}"],
        ["python", "-c", f"import runpy; runpy.run_module('{DOOR}')"],
        ["python", f"/src/{DOOR}.py"],  # a script (the module's name is a path's part)
        ["python", "-m", f"{DOOR}_tests"],
        ["python", "-m", "pytest", "-m", DOOR],  # pytest's own -m
        ["python", "-X", "-m", "x", DOOR],  # -X takes "-m" as its value; then a script
        ["tail", "-f", f"/var/log/{DOOR}.log"],
        ["vim", "-m", DOOR],
        ["python", "-m"],
        ["python", "-X"],
        ["python", "--", "-m", DOOR],
        ["python", "-", "-m", DOOR],
        [],
    ],
)
def test_other_command_lines_are_not_a_door(argv: list[str]) -> None:
    assert not door.is_door_command(argv)
