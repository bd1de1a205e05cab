"""How every command ends: one error type for a message on stderr, and the exit codes (defined
with the other outcomes in vramtop/outcomes.py, below the machines that end in one too)."""

from __future__ import annotations

from vramtop.outcomes import ExitCode

__all__ = ["CommandError", "ExitCode"]


class CommandError(Exception):
    """A message for stderr; the command exits with `ExitCode.USAGE`."""
