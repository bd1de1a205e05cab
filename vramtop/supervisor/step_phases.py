"""A step's phases for its timeline event: what vLLM's log says of the start the step made
(`core.vllm.start_phases`), read from the record's log since that start's offset."""

from __future__ import annotations

from pathlib import Path

from vramtop.core.json_types import JsonObject
from vramtop.core.vllm.log_run import last_run
from vramtop.core.vllm.start_phases import parse_start_phases
from vramtop.supervisor.readiness import tail
from vramtop.supervisor.state import ServerRecord

# A start's log is some hundred lines (a few KiB); this bounds the read of a log that
# carries far more (a chatty start, requests logged since).
READ_LIMIT = 1024 * 1024


def start_phases(rec: ServerRecord | None) -> JsonObject:
    """The phases of the record's start as its log tells them (weights, compilation, graphs,
    engine set-up, log's start → ready), the known ones only; empty without a log."""
    if rec is None or rec.log_path is None:
        return {}
    lines = tail(Path(rec.log_path), rec.log_offset, READ_LIMIT)
    return parse_start_phases(last_run(lines)).fields()
