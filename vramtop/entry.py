"""The `vramtop` command's entry point.

Ctrl+C at any moment ends vramtop quietly with the shell's status for an interrupt (130):
also in its first half second, while Python is still importing it, before `cli.main` and
its own handler exist.
"""

from __future__ import annotations

import gc
import sys

INTERRUPTED = 130


def run() -> None:
    # Start-up builds what lives as long as the process (modules, classes, the console's
    # widgets): the cyclic collector walking it again and again as it grows found nothing
    # to free and held up the console's first frame by some 20 ms. It resumes once the
    # console has settled (a second after it opened: tui/app.py), and at once for any other
    # command (cli.main).
    gc.disable()
    try:
        from vramtop.cli import main

        code = main()
    except KeyboardInterrupt:
        code = INTERRUPTED
    finally:
        gc.enable()
    sys.exit(code)
