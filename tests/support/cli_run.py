"""Running vramtop's command line inside a test's own process: its exit code, and what it
printed, as a person at a terminal would see them."""

from __future__ import annotations

import contextlib
import io

from vramtop import cli


def exit_code(argv: list[str]) -> int:
    """`vramtop ARGV`'s exit code, also where it ends by `SystemExit` (argparse's refusals)."""
    try:
        return cli.main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def run_captured(argv: list[str]) -> tuple[int, str]:
    """The command's exit code and everything it printed (stdout and stderr together)."""
    code, out, err = run_apart(argv)
    return code, out + err


def run_apart(argv: list[str]) -> tuple[int, str, str]:
    """The command's exit code, what it printed on stdout, and what on stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = exit_code(argv)
    return code, out.getvalue(), err.getvalue()
