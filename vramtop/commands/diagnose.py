"""`vramtop diagnose FILE [--json]`: run the live console's diagnosis over a recorded session."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from vramtop.commands.catalog import summary
from vramtop.commands.shared_options import Given
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.diagnosis.normal_rate import NormalRate
from vramtop.core.findings import Finding, Remedy
from vramtop.core.model import GIB, Sample
from vramtop.session.session_reader import Record, SessionError, SessionReader

EXIT_UNREADABLE = 2


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "diagnose",
        help=summary("diagnose"),
        description="Read a session recorded by `vramtop record` (or the console) and print "
        "the findings the live console would have raised: what happened, the numbers, "
        "what it rules out, and what to do.",
    )
    parser.add_argument("file", type=Path, help="the session file (JSON Lines)")
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the findings as JSON (see the session format)",
    )


def diagnose_records(records: Iterable[Record], normal: NormalRate | None = None) -> list[Finding]:
    """Every finding of a session, closed and open, in the order first seen (`normal`: the
    normal rate the recording's header carries, compared with from the first second)."""
    diagnoser = Diagnoser(remembered=normal)
    for record in records:
        if isinstance(record, Sample):
            diagnoser.feed_sample(record)
        elif record.name != "finding":  # what the console concluded live is not input
            diagnoser.feed_event(record.t, record.name, record.detail)
    return diagnoser.all_findings()


def diagnose_file(path: str | Path) -> list[Finding]:
    """Raises `SessionError` when the file is not a readable session, or has no readable
    sample (every line damaged: "no findings" would be a false all-clear)."""
    reader = SessionReader(path)
    findings = diagnose_records(reader.records(), reader.header.normal_rate)
    if reader.samples_read == 0:
        damaged = f" ({reader.skipped_lines} damaged lines skipped)" if reader.skipped_lines else ""
        raise SessionError(f"{path}: no readable sample{damaged}, nothing to diagnose")
    if reader.skipped_lines:
        print(
            f"note: {path}: {reader.skipped_lines} damaged lines skipped; the findings are "
            "from the rest",
            file=sys.stderr,
        )
    return findings


@dataclass(frozen=True)
class DiagnoseOptions:
    """`vramtop diagnose`'s options (see commands/shared_options.py)."""

    file: Path
    json: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DiagnoseOptions:
        given = Given(args)
        file = given.path("file")
        if file is None:
            raise TypeError("vramtop diagnose: no FILE in the parsed arguments")
        return cls(file=file, json=given.flag("json"))


def run(args: argparse.Namespace) -> int:
    options = DiagnoseOptions.from_args(args)
    try:
        findings = diagnose_file(options.file)
    except SessionError as e:
        print(f"vramtop diagnose: {e}", file=sys.stderr)
        return EXIT_UNREADABLE
    if options.json:
        print(json.dumps({"findings": [f.to_json() for f in findings]}, indent=2))
    else:
        print(render_text(findings))
    return 0


def render_text(findings: list[Finding]) -> str:
    if not findings:
        return "No findings: nothing went wrong that vramtop can name."
    blocks = []
    for f in findings:
        when = (
            f"from {f.first_seen_t:.0f} s, still open"
            if f.closed_t is None
            else f"from {f.first_seen_t:.0f} s to {f.closed_t:.0f} s ({f.duration_s:.0f} s)"
        )
        lines = [f"[{f.severity}] {f.kind} — {when}", f"  {f.summary}"]
        for rung, sentences in f.ladder.rungs():
            for sentence in sentences:
                lines.append(f"  {rung}: {sentence}")
        lines.append(f"  remedy: {_remedy_text(f.remedy)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _remedy_text(remedy: Remedy) -> str:
    parts = [remedy.action or "?"]
    util = remedy.budget
    if util is not None:
        parts.append(f"--gpu-memory-utilization {util:.2f}")
    if remedy.max_model_len is not None:
        parts.append(f"--max-model-len {remedy.max_model_len}")
    pool, after = remedy.kv_pool_bytes, remedy.kv_pool_bytes_after
    if pool and after is not None:
        parts.append(f"(KV pool {pool / GIB:.2f} → {after / GIB:.2f} GiB)")
    for option in remedy.options:
        if option.value is not None:
            parts.append(f"{option.flag} {option.value}")
    if remedy.why:
        parts.append(f"— {remedy.why}")
    return " ".join(parts)
