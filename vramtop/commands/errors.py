"""How a command ends with a message: one error type for a message on stderr (the exit codes
are vramtop/outcomes.py's `ExitCode`, below the machines that end in one too)."""

from __future__ import annotations


class CommandError(Exception):
    """A message for stderr; the command exits with `ExitCode.USAGE`."""
