"""`vramtop guard --print-unit`: a systemd user unit that runs this guard (WSL2 runs systemd
where it is enabled). `KillMode=process`: stopping the unit ends the guard alone, and the vLLM
server it started keeps serving, as on SIGTERM."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vramtop.commands.guard import GuardOptions


def vramtop_command() -> list[str]:
    """The absolute command that runs this vramtop: its script, or this interpreter with
    `-m vramtop` where it was started as a module."""
    script = Path(sys.argv[0])
    if script.name == "vramtop" and script.exists():
        return [str(script.resolve())]
    return [str(Path(sys.executable).absolute()), "-m", "vramtop"]


def unit_text(options: GuardOptions) -> str:
    """The unit's text, `ExecStart` running the guard as it was asked for here: its
    profile (or `--demo`, `--wsl`, `--card`) and every option given (those left out are the
    profile's, read when the unit starts)."""
    from vramtop.commands.guard import DEFAULT_INTERVAL_S

    target = options.target
    words = [*vramtop_command(), "guard"]
    if target.demo:
        words.append("--demo")
        if target.wsl:
            words.append("--wsl")
        if target.card:
            words += ["--card", target.card]
    elif target.profile:
        words += ["--profile", target.profile]
    if options.notify is not None:
        words += ["--notify", ",".join(options.notify)]
    if options.on_finding is not None:
        words += ["--on-finding", options.on_finding]
    if options.auto_remedy is not None:
        words += ["--auto-remedy", options.auto_remedy]
    if options.adaptive:
        words.append("--adaptive")
    if options.settle_s is not None:
        words += ["--settle", f"{options.settle_s:g}"]
    if options.interval != DEFAULT_INTERVAL_S:
        words += ["--interval", f"{options.interval:g}"]
    exec_start = " ".join(_quoted(w) for w in words)
    return f"""\
[Unit]
Description=vramtop guard: keeps vLLM fast while the desktop takes its memory

[Service]
Type=simple
ExecStart={exec_start}
Restart=on-failure
RestartSec=10
# Stopping the guard leaves the vLLM server it started serving.
KillMode=process
TimeoutStopSec=150

[Install]
WantedBy=default.target
"""


def _quoted(word: str) -> str:
    """A word as systemd's ExecStart reads it (double quotes where it has a space)."""
    if word and all(c not in word for c in " \"\\'$%;"):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'
