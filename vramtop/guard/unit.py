"""`vramtop guard --print-unit`: a systemd user unit that runs this guard (WSL2 runs systemd
where it is enabled). `KillMode=process`: stopping the unit ends the guard alone, and the vLLM
server it started keeps serving, as on SIGTERM."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from vramtop.core.secrets import written_secret
from vramtop.core.unit_words import UnitValueError, environment_line, exec_line

# Each word of the guard's command line after `vramtop`, with the option it is for (named
# in the message when systemd cannot hold it).
Words = list[tuple[str, str]]


def vramtop_command() -> list[str]:
    """The absolute command that runs this vramtop: its script, or this interpreter with
    `-m vramtop` where it was started as a module."""
    script = Path(sys.argv[0])
    if script.name == "vramtop" and script.exists():
        return [str(script.resolve())]
    return [str(Path(sys.executable).absolute()), "-m", "vramtop"]


def unit_text(asked: Words, on_finding: str | None) -> str:
    """The unit's text, `ExecStart` running the guard as it was asked for here (`asked`: its
    words after `vramtop`, as the command spells them; `on_finding` the command it runs, one
    of them), and the variables that make it this guard (`_environment`). Every value is
    quoted by systemd's rules (core/unit_words.py); `UnitValueError` names one that a unit
    cannot hold."""
    if on_finding is not None and _written_key(on_finding):
        raise UnitValueError(
            "--on-finding carries a key (a token, password or Bearer value), and a unit file is "
            "plain text that other users may read: let the command read the key from a file "
            "only you can read"
        )
    executable, *first = vramtop_command()
    exec_start = exec_line(executable, [("this vramtop's path", w) for w in first] + asked)
    assignments = [environment_line(name, value) for name, value in _environment(first)]
    environment = f"Environment={' '.join(assignments)}\n" if assignments else ""
    return f"""\
[Unit]
Description=vramtop guard: keeps vLLM fast while the desktop takes its memory

[Service]
Type=simple
{environment}ExecStart={exec_start}
Restart=on-failure
RestartSec=10
# Stopping the guard leaves the vLLM server it started serving.
KillMode=process
TimeoutStopSec=150

[Install]
WantedBy=default.target
"""


def _environment(module_words: list[str]) -> list[tuple[str, str]]:
    """The service's variables that make its guard this one: the `VRAMTOP_HOME` whose
    profile was checked, and, where this vramtop ran as a module from a directory its
    interpreter does not search by itself (a checkout on `PYTHONPATH`, the current
    directory), that directory: otherwise `-m vramtop` would find another vramtop, or none.
    Absolute paths: the service does not start in this shell's directory."""
    found: list[tuple[str, str]] = []
    home = os.environ.get("VRAMTOP_HOME")
    if home:
        found.append(("VRAMTOP_HOME", str(Path(home).absolute())))
    if module_words:
        import sysconfig

        import vramtop

        package_dir = Path(vramtop.__file__).resolve().parent.parent
        searched = {Path(sysconfig.get_path(name)).resolve() for name in ("purelib", "platlib")}
        if package_dir not in searched:
            found.append(("PYTHONPATH", str(package_dir)))
    return found


def _written_key(command: str) -> bool:
    """Whether `command` has a key written in it, not one named by a variable
    (`Bearer $TOKEN` names one; the command's own shell or script reads it)."""
    return written_secret(re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", "", command))
