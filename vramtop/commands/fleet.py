"""`vramtop fleet NAME=URL ...`: several boxes on one screen, read from their exporters.

Each box runs `vramtop export`; the fleet reads each one's /metrics (read-only: it never acts
on a box), every box at the same time with a short timeout of its own, and shows one row per
box: its card and platform, the server's state, the budget, the desktop's headroom, the KV
pool, the decode rate per request against its normal, the open findings (the collapse in the
error colour), the front door and the age of the box's latest sample. A box that does not
answer, or whose sample is stale, says so instead of showing figures. `--once` prints the
rows once (`--json`: one object per box, with `query_time`).

`--prometheus URL` reads the same rows through a Prometheus server that scrapes the boxes'
exporters (its HTTP API; a box is named by its target's `box` label, else its `instance`);
where both it and NAME=URL are given, Prometheus is used and the fleet says so. With neither,
the `[fleet]` table of config.toml names them (`NAME = "URL"`, `prometheus = "URL"`). Enter
on a row shows that box's panels, `e` its steps where its exporter serves them.
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
    from vramtop.core.fleet_sources import Sources
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
        "--prometheus",
        default=None,
        metavar="URL",
        help="read the boxes through this Prometheus server's HTTP API (it scrapes their "
        "exporters); used over NAME=URL where both are given",
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
    sources: Sources
    once: bool
    json: bool
    timeout_s: float


NO_BOX = (
    "name at least one box: vramtop fleet desk=http://192.168.1.20:9464 "
    "spark=http://spark:9464 (each box runs `vramtop export`), or --prometheus URL, or a "
    "[fleet] table in config.toml"
)


def options_from(args: argparse.Namespace) -> FleetOptions:
    """The options; ValueError with a one-line reason on bad input (ConfigError: config.toml's
    `[fleet]` table, read where the command line names no box and no Prometheus)."""
    from vramtop.core.fleet_sources import sources, table_sources
    from vramtop.sources.fleet_client import TIMEOUT_S

    given = Given(args)
    texts = list(args.boxes)  # this command's own positional: always set, [] when none
    prometheus = given.text("prometheus")
    timeout = given.number("timeout")
    if timeout is not None and not 0.1 <= timeout <= 60:
        raise ValueError("--timeout must be from 0.1 to 60 seconds")
    if texts or prometheus is not None:
        chosen = sources(texts, prometheus)
    else:
        from vramtop.settings import load_settings

        chosen = table_sources(load_settings().fleet)  # checked as the file was read
    if not chosen.boxes and chosen.prometheus is None:
        raise ValueError(NO_BOX)
    return FleetOptions(
        sources=chosen,
        once=given.flag("once"),
        json=given.flag("json"),
        timeout_s=TIMEOUT_S if timeout is None else timeout,
    )


def run(args: argparse.Namespace) -> int:
    from vramtop.settings import ConfigError

    try:
        options = options_from(args)
    except (ValueError, ConfigError) as exc:
        print(f"vramtop fleet: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if options.json and not options.once:
        print("vramtop fleet: --json prints once: add --once", file=sys.stderr)
        return ExitCode.USAGE
    if options.sources.said:
        print(f"vramtop fleet: {options.sources.said}", file=sys.stderr)
    if options.once:
        return _once(options)
    from vramtop.tui.fleet.fleet_app import FleetApp

    FleetApp(options.sources, timeout_s=options.timeout_s, notifier=_notifier()).run()
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

    prometheus = options.sources.prometheus
    if prometheus is not None:
        from vramtop.sources.fleet_prometheus import read

        answer = read(prometheus, timeout_s=options.timeout_s)
        if answer.error is not None:
            print(f"vramtop fleet: {answer.error}", file=sys.stderr)
            return ExitCode.ERROR
        rows = [row for row, _ in answer.rows]
    else:
        rows = rows_for(fetch_all(options.sources.boxes, timeout_s=options.timeout_s))
    if options.json:
        print(json.dumps([row.to_json() for row in rows], indent=2))
    else:
        print(table_text(rows))
    return 0
