"""The `vramtop` command's entry point.

Ctrl+C at any moment ends vramtop quietly with the shell's status for an interrupt (130):
also in its first half second, while Python is still importing it, before `cli.main` and
its own handler exist.
"""

from __future__ import annotations

import sys

INTERRUPTED = 130


def run() -> None:
    try:
        from vramtop.cli import main

        code = main()
    except KeyboardInterrupt:
        code = INTERRUPTED
    sys.exit(code)
