"""Command-line entry point: parses arguments and hands over to a command module.

Holds no logic of its own. Each subcommand lives in `vramtop/commands/<name>.py` with
`add_parser(subparsers)` and `run(args) -> int`. With no subcommand, vramtop opens the console
(or, with `--once`, prints one snapshot).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from vramtop import __version__
from vramtop.commands.argtypes import front_door, interval_seconds, server_url, variable_name
from vramtop.commands.catalog import BY_NAME, COMMANDS, CONSOLE_PAGE
from vramtop.outcomes import ExitCode
from vramtop.sim.card import CARDS

DESCRIPTION = """\
vramtop watches a vLLM server on the GPU your desktop also uses: VRAM split between vLLM and
the desktop, the KV pool, tokens/s, and the silent collapse when a video call squeezes the
server. It starts, stops and relaunches vLLM with one key.

Try it without a GPU:  vramtop --demo
"""


class _Parser(argparse.ArgumentParser):
    """The command line's parser (its subcommands' too): an error that repeats what was typed
    (`unrecognized arguments: …`, `invalid choice: …`) never repeats a key typed by mistake."""

    docs_page: str | None = None  # ends `--help`: "Docs: PAGE" (DOCS_PAGES)

    def format_help(self) -> str:
        text = super().format_help()
        return f"{text}\nDocs: {self.docs_page}\n" if self.docs_page else text

    def error(self, message: str) -> NoReturn:
        from vramtop.core.secrets import mask_pasted_keys

        super().error(mask_pasted_keys(message))


def build_parser(only: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line's parser. `only`: the commands whose modules are imported for
    their own options; every other command is named by its summary alone (the catalog), as
    `vramtop --help` and an unknown command's message need. None: every command's module."""
    parser = _Parser(
        prog="vramtop",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"vramtop {__version__}")
    add_monitor_options(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    from vramtop.commands.shared_options import add_shared_options

    for command in COMMANDS:
        if only is None or command.name in only:
            importlib.import_module(command.module).add_parser(subparsers)
        else:
            subparsers.add_parser(command.name, help=command.summary, add_help=False)
    parser.docs_page = CONSOLE_PAGE
    for name, sub in subparsers.choices.items():
        if only is not None and name not in only:
            continue
        if isinstance(sub, _Parser):
            sub.docs_page = BY_NAME[name].docs_page
        if BY_NAME[name].takes:
            add_shared_options(sub, *BY_NAME[name].takes)
    return parser


def _refuse_unused_globals(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A top-level option given before a subcommand that does not act on it: refused (exit 2)
    as the subcommand refuses it after its name, never passed over in silence."""
    taken = BY_NAME[args.command].takes
    for action in parser._actions:
        if not action.option_strings or action.dest in taken or action.dest in ("help", "version"):
            continue
        if vars(args).get(action.dest, action.default) != action.default:
            parser.error(
                f"{action.option_strings[0]} does not go with `vramtop {args.command}` "
                f"(vramtop {args.command} --help lists what it takes)"
            )


def add_monitor_options(parser: argparse.ArgumentParser) -> None:
    """Options of the console and of `--once` (also accepted by headless commands)."""
    parser.add_argument(
        "--demo",
        action="store_true",
        help="run against the built-in simulated machine (no GPU or vLLM needed)",
    )
    parser.add_argument(
        "--wsl",
        action="store_true",
        help="with --demo: present the simulated GPU the WSL2 way (no per-process memory)",
    )
    parser.add_argument(
        "--card",
        choices=tuple(CARDS),
        default=None,
        help="with --demo: which machine to simulate: an RTX 5090 (default), a DGX Spark "
        "(unified memory) or a Radeon AI PRO R9700 (ROCm, spills into GTT)",
    )
    parser.add_argument(
        "--once", action="store_true", help="print one snapshot and exit instead of the console"
    )
    parser.add_argument("--json", action="store_true", help="with --once: print JSON")
    parser.add_argument(
        "--url",
        type=server_url,
        help="the vLLM server to watch (default: the profile's, else http://127.0.0.1:8000)",
    )
    parser.add_argument("--profile", help="the profile to use (default: the default profile)")
    parser.add_argument(
        "--interval",
        type=interval_seconds,
        default=None,
        help="seconds between samples (default 1.0)",
    )
    parser.add_argument(
        "--record",
        type=Path,
        metavar="FILE",
        help="console: also record the session to FILE (for vramtop diagnose / replay)",
    )
    parser.add_argument(
        "--no-windows",
        action="store_true",
        help="WSL2: do not read Windows' GPU counters through powershell.exe (the split is "
        "then derived from vLLM's budget)",
    )
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        type=variable_name,
        help="read the server's API key from this environment variable",
    )
    parser.add_argument(
        "--front-door",
        type=front_door,
        metavar="ADDR",
        help="with --demo: where the front door listens (HOST:PORT; default: the demo's "
        "port), or off to serve without one",
    )


class _NotForTheFirstPass(Exception):
    """The arguments need the parser that words errors (an option's bad value, say)."""


class _FirstPassParser(_Parser):
    def error(self, message: str) -> NoReturn:
        raise _NotForTheFirstPass(message)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The arguments, parsed, with only the named command's module imported: all of them
    together take most of a second to import, which every `vramtop status` would pay and the
    console and `--once` (timed by people) never use. A first pass with every command named
    by its summary alone finds which command was typed; the parser that parses for real then
    has that command's own options, so what it accepts, refuses and says is the same as the
    whole parser's (tests/cli/test_options_everywhere.py holds them to it)."""
    tokens = list(sys.argv[1:] if argv is None else argv)
    first = _FirstPassParser(prog="vramtop", add_help=False)
    add_monitor_options(first)
    first.add_argument("--version", action="store_true")
    names = first.add_subparsers(dest="command")
    for command in COMMANDS:
        names.add_parser(command.name, add_help=False)
    try:
        found, rest = first.parse_known_args(tokens)
    except _NotForTheFirstPass:
        found, rest = None, tokens
    if found is not None and found.command is None and not rest and not found.version:
        del found.version
        return found  # the console or `--once`: no command's module at all
    parser = build_parser(() if found is None or found.command is None else (found.command,))
    args = parser.parse_args(argv)
    if args.command:
        _refuse_unused_globals(parser, args)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command or args.once:
        gc.enable()  # held off for the console's start only (entry.run)
    from vramtop.locations import home_problem

    problem = home_problem()
    if problem is not None:
        print(f"vramtop: {problem}", file=sys.stderr)
        return ExitCode.USAGE
    _log_to_file(console=not args.command and not args.once)
    try:
        if args.command:
            module = importlib.import_module(BY_NAME[args.command].module)
            return int(module.run(args))
        from vramtop.commands import monitor

        return monitor.run(args)
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`vramtop diagnose f --json | head`): nothing left to say.
        sys.stderr.close()
        return 0
    except OSError as exc:
        words = _file_problem(exc)
        if words is None:
            return _unexpected(exc)
        logging.getLogger("vramtop").info("%s", words, exc_info=True)
        print(f"vramtop: {words}", file=sys.stderr)
        return ExitCode.USAGE
    except Exception as exc:
        return _unexpected(exc)


def _file_problem(exc: OSError) -> str | None:
    """A file or directory that could not be used (a read-only file system, a file where a
    directory should be, a name too long, no permission), in words with the fix; None for
    an error that names no file (a bug of ours)."""
    from vramtop import files
    from vramtop.core.secrets import mask_line

    words = files.problem_words(exc)
    return None if words is None else mask_line(words)


def _unexpected(exc: Exception) -> int:
    """A bug of ours: the traceback goes to the log file, the user gets one line."""
    from vramtop.core.secrets import mask_line
    from vramtop.locations import own_log_file

    logging.getLogger("vramtop").exception("unexpected error")
    try:
        where = f"Details are in {own_log_file()}"
    except OSError:
        where = "vramtop's own log cannot be written"
    print(
        f"vramtop: unexpected error: {mask_line(str(exc))}. {where}; please report it.",
        file=sys.stderr,
    )
    return ExitCode.ERROR


class _LogFileHandler(logging.StreamHandler[TextIO]):
    """vramtop's own log: a record it cannot write (a full disk, a quota) is lost quietly.
    logging's default prints "--- Logging error ---" and a traceback on stderr, a person's
    screen, in front of the one line that says what failed."""

    def handleError(self, record: logging.LogRecord) -> None:
        pass


class _MaskingFormatter(logging.Formatter):
    """vramtop's own log never holds a key: every formatted record (traceback included) is
    masked."""

    def format(self, record: logging.LogRecord) -> str:
        from vramtop.core.secrets import mask_line

        return "\n".join(mask_line(line) for line in super().format(record).split("\n"))


class _OneLineFormatter(_MaskingFormatter):
    """A record as one masked line: no traceback (stderr is a person's screen)."""

    def format(self, record: logging.LogRecord) -> str:
        record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None})
        return super().format(record).split("\n", 1)[0]


def _log_to_file(console: bool = False) -> None:
    """Tracebacks and diagnostics go to vramtop's own log file, never to the screen. Where it
    cannot be written, a headless command says its warnings on stderr in one line each (no
    traceback) and the console says nothing while it draws (it would be drawn over)."""
    from vramtop import files
    from vramtop.locations import own_log_file

    try:
        # Opened user-only and never through a link (logging would follow one and use the
        # umask): tracebacks can quote command lines and paths.
        stream = os.fdopen(files.open_append(own_log_file()), "a", encoding="utf-8")
        handler = _LogFileHandler(stream)
        handler.setFormatter(_MaskingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.basicConfig(level=logging.INFO, handlers=[handler])
    except OSError as exc:
        print(f"vramtop: not writing its own log: {_file_problem(exc) or exc}", file=sys.stderr)
        fallback: logging.Handler = (
            logging.NullHandler() if console else logging.StreamHandler(sys.stderr)
        )
        fallback.setFormatter(_OneLineFormatter("vramtop: %(levelname)s: %(message)s"))
        logging.basicConfig(level=logging.WARNING, handlers=[fallback])
    # One line per HTTP request at 1 Hz would drown the log that matters.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
