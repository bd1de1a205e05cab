"""`vramtop events [--profile P | --demo] [--json] [--since T]`: the profile's lasting timeline.

What the supervisor's actions (who asked, what came of them) and the findings left in the
profile's event log, across every vramtop that ran: `--json` prints
`{"events": [{"t", "event", "detail"}]}` (`t`: Unix time), otherwise a table in local time.
`--since` takes an ISO 8601 time (local time when it names no offset) or a duration back
from now: `90s`, `30m`, `2h`, `1d`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from vramtop.commands.catalog import summary
from vramtop.commands.errors import CommandError
from vramtop.commands.shared_options import Given, Target, add_shared_options
from vramtop.core.json_types import JsonObject
from vramtop.core.server_events import Event, EventName
from vramtop.outcomes import ExitCode

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.IGNORECASE)
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def since_time(text: str, now: float | None = None) -> float:
    """`--since`'s value as Unix time: a duration back from `now`, or an ISO time."""
    now = time.time() if now is None else now
    match = _DURATION.match(text)
    if match:
        seconds = float(match.group(1)) * _UNIT_S[match.group(2).lower()]
        if seconds > 1e10:
            raise argparse.ArgumentTypeError(f"not a usable duration: {text!r}")
        return now - seconds
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time or a duration: {text!r} (give e.g. 2h, 30m, or 2026-12-01T14:00)"
        ) from None
    try:
        return when.timestamp()  # (a naive time is taken as local time)
    except (OverflowError, OSError, ValueError):
        raise argparse.ArgumentTypeError(f"not a usable time: {text!r}") from None


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "events",
        help=summary("events"),
        description="The events kept for a profile across vramtop's runs (bounded, rotated).",
    )
    add_shared_options(p, "demo", "card", "profile", "json")
    p.add_argument(
        "--since",
        type=since_time,
        metavar="T",
        help="only events from T on: an ISO time (2026-12-01T14:00) or a duration back (2h)",
    )


@dataclass(frozen=True)
class EventsOptions:
    demo: bool
    card: str | None
    profile: str | None
    json: bool
    since: float | None
    wsl: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EventsOptions:
        given = Given(args)
        return cls(
            demo=given.flag("demo"),
            card=given.text("card"),
            profile=given.text("profile"),
            json=given.flag("json"),
            since=given.number("since"),
            wsl=given.flag("wsl"),
        )


def run(args: argparse.Namespace) -> int:
    options = EventsOptions.from_args(args)
    try:
        name = _profile_name(options)
    except CommandError as exc:
        print(f"vramtop: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    from vramtop.event_log import EventLog

    log = EventLog.for_profile(name)
    events = log.read(since=options.since)
    if log.skipped:
        print(f"vramtop: {log.skipped} damaged line(s) of {log.path} skipped", file=sys.stderr)
    if options.json:
        print(json.dumps({"events": [e.to_json() for e in events]}, default=str))
    elif not events:
        print(
            nothing_shown(name, log.path, older=log.older, since=options.since, damaged=log.skipped)
        )
    else:
        for line in table(events, _terminal_width()):
            print(line)
    return ExitCode.OK


def _terminal_width() -> int | None:
    """The terminal's width, where the table is printed to one; None (whole lines) for a
    pipe or a file: what reads it there gets every word."""
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size((100, 24)).columns


def nothing_shown(
    name: str, path: Path, *, older: int, since: float | None, damaged: int = 0
) -> str:
    """Why the table is empty: no event kept at all, only damaged lines, or only events
    older than --since."""
    if not older or since is None:
        if damaged:
            return f"no readable events for profile {name}: {path} holds only damaged lines"
        return f"no events for profile {name} yet ({path})"
    when = datetime.fromtimestamp(since).strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"no events for profile {name} since {when}: {older:,} older "
        f"event{'s' if older != 1 else ''} kept (drop --since to see them)"
    )


def _profile_name(options: EventsOptions) -> str:
    if options.card is not None and not options.demo:
        from vramtop.commands.common import CARD_WITHOUT_DEMO

        raise CommandError(CARD_WITHOUT_DEMO)
    if options.wsl and not options.demo:
        from vramtop.commands.common import WSL_WITHOUT_DEMO

        raise CommandError(WSL_WITHOUT_DEMO)
    if options.demo:
        from vramtop.commands.common import demo_card
        from vramtop.machines.demo_world import demo_profile_name

        target = Target(demo=True, card=options.card, profile=options.profile)
        return demo_profile_name(demo_card(target))
    from vramtop import config, event_log, profiles

    try:
        return profiles.load_profile(options.profile).name
    except config.ConfigError as exc:
        # A profile removed since keeps its timeline: it is read by its name.
        if options.profile is not None and event_log.path_for(options.profile).exists():
            return options.profile
        raise CommandError(f"{exc} (or try --demo)") from None


def table(events: list[Event], width: int | None = None) -> list[str]:
    """One line per event: local time, event, who asked, what happened; a guard's decision
    says why, shortened to fit `width` (None: whole lines)."""
    cells = [
        (
            datetime.fromtimestamp(e.t).strftime("%Y-%m-%d %H:%M:%S"),
            e.name,
            str(e.detail.get("asked_by", "")),
        )
        for e in events
    ]
    head = ("time", "event", "asked by")
    widths = [max(len(r[i]) for r in [head, *cells]) for i in range(3)]
    room = None if width is None else max(MIN_WHAT, width - sum(widths) - 6)
    rows = [(*c, describe(e, room)) for c, e in zip(cells, events, strict=True)]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in [(*head, "what"), *rows]
    ]


MIN_WHAT = 30  # the fewest characters a guard's decision and why are shortened to


_RESULTS = {
    "ok": "served",
    "rolled_back": "did not start: the previous flags serve again",
    "failed": "failed",
}


def describe(event: Event, room: int | None = None) -> str:
    """What happened in words; a `guard` event's `decision` first and its `why` last, the
    why shortened so that the whole fits `room` characters (None: whole)."""
    detail: JsonObject = dict(event.detail)
    if event.name == EventName.GUARD:
        return _guard_words(detail, room)
    if event.name == "finding":
        kind, change = detail.get("kind", ""), detail.get("change", "")
        lasted = detail.get("duration_s")
        if change == "closed" and isinstance(lasted, int | float):
            return f"{kind} closed after {lasted:.0f} s"
        return f"{kind} {change}: {detail.get('summary', '')}".strip()
    served = detail.get("first_served_s")
    if event.name == EventName.FIRST_SERVED and isinstance(served, int | float):
        return f"the first request served {served:.2f} s after the {detail.get('step')}'s release"
    parts: list[str] = []
    budget = detail.get("gpu_memory_utilization")
    if isinstance(budget, int | float) and not isinstance(budget, bool):
        parts.append(f"budget {budget:.2f}")
    if isinstance(detail.get("max_model_len"), int):
        parts.append(f"max-model-len {detail['max_model_len']:,}")
    result = detail.get("result")
    if isinstance(result, str):
        parts.append(_RESULTS.get(result, result) if event.name == "relaunch" else result)
    message = detail.get("message")
    if isinstance(message, str) and result != "ok":
        parts.append(message)
    return " · ".join(parts) or ", ".join(f"{k} {v}" for k, v in detail.items())


def _guard_words(detail: JsonObject, room: int | None) -> str:
    """A guard's decision: `acted · budget 0.85 · served · why …`."""
    rest = {k: v for k, v in detail.items() if k not in ("decision", "why", "policy", "step")}
    said = describe(Event(0.0, "relaunch", rest)) if rest else ""
    decision = str(detail.get("decision", ""))
    if isinstance(detail.get("step"), str) and detail["step"]:
        decision += f" ({detail['step']})"
    head = " · ".join(p for p in (decision, said) if p)
    why = str(detail.get("why") or "")
    if not why:
        return head
    if room is not None:
        left = room - len(head) - 3
        if len(why) > left:
            why = why[: max(left - 1, 0)].rstrip() + "…" if left > 1 else ""
    return f"{head} · {why}" if why else head
