"""`vramtop fleet NAME=URL ...`: several boxes on one screen, read from their exporters.

Each box runs `vramtop export`; the fleet reads each one's /metrics (read-only: it never acts
on a box), every box at the same time with a short timeout of its own, and shows one row per
box: its card and platform, the server's state, the budget, the desktop's headroom, the KV
pool, the decode rate per request against its normal, the open findings (the collapse in the
error colour), the front door and the age of the box's latest sample. A box that does not
answer, or whose sample is stale, says so instead of showing figures. `--once` prints the
rows once (`--json`: one object per box, with `query_time`).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vramtop.commands.catalog import summary
from vramtop.commands.shared_options import Given
from vramtop.outcomes import ExitCode

if TYPE_CHECKING:
    from vramtop.core.fleet_rows import Box
    from vramtop.notify.notifier import Notifier


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "fleet",
        help=summary("fleet"),
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "boxes",
        nargs="*",
        metavar="NAME=URL",
        help="a box and its exporter, e.g. desk=http://192.168.1.20:9464 (/metrics is read)",
    )
    # Also taken before the command's name (`vramtop --once fleet`): no default of its own
    # overwrites the top-level option's value.
    parser.add_argument(
        "--once",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the rows once and exit (no console)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="with --once: one JSON object per box",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds each box gets to answer (default 1.5)",
    )


@dataclass(frozen=True)
class FleetOptions:
    boxes: tuple[Box, ...]
    once: bool
    json: bool
    timeout_s: float


def options_from(args: argparse.Namespace) -> FleetOptions:
    """The options; ValueError with a one-line reason on bad input."""
    from vramtop.core.fleet_rows import parse_boxes
    from vramtop.sources.fleet_client import TIMEOUT_S

    given = Given(args)
    texts = list(args.boxes)  # this command's own positional: always set, [] when none
    if not texts:
        raise ValueError(
            "name at least one box: vramtop fleet desk=http://192.168.1.20:9464 "
            "spark=http://spark:9464 (each box runs `vramtop export`)"
        )
    timeout = given.number("timeout")
    if timeout is not None and not 0.1 <= timeout <= 60:
        raise ValueError("--timeout must be from 0.1 to 60 seconds")
    return FleetOptions(
        boxes=tuple(parse_boxes(texts)),
        once=given.flag("once"),
        json=given.flag("json"),
        timeout_s=TIMEOUT_S if timeout is None else timeout,
    )


def run(args: argparse.Namespace) -> int:
    try:
        options = options_from(args)
    except ValueError as exc:
        print(f"vramtop fleet: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if options.json and not options.once:
        print("vramtop fleet: --json prints once: add --once", file=sys.stderr)
        return ExitCode.USAGE
    if options.once:
        return _once(options)
    from vramtop.tui.fleet.fleet_app import FleetApp

    FleetApp(list(options.boxes), timeout_s=options.timeout_s, notifier=_notifier()).run()
    return 0


def _notifier() -> Notifier | None:
    """The machine's default senders for a collapse (a toast on WSL2, notify-send on a Linux
    desktop), less the terminal's sequences: the console owns the terminal. None where none
    can work here."""
    import shutil

    from vramtop.notify import default_names, notifier_for
    from vramtop.notify.toast import in_wsl

    wsl = in_wsl()
    names = [name for name in default_names(wsl=wsl) if name != "terminal"]
    if "notify-send" in names and shutil.which("notify-send") is None:
        names.remove("notify-send")
    return notifier_for(names, on_finding=None, wsl=wsl) if names else None


def _once(options: FleetOptions) -> int:
    from vramtop.core.fleet_rows import rows_for
    from vramtop.sources.fleet_client import fetch_all
    from vramtop.tui.fleet.cells import table_text

    rows = rows_for(fetch_all(options.boxes, timeout_s=options.timeout_s))
    if options.json:
        print(json.dumps([row.to_json() for row in rows], indent=2))
    else:
        print(table_text(rows))
    return 0
