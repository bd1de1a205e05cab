"""How one box's row reads, cell by cell: the fleet console's table and `vramtop fleet
--once` without --json show the same words. Unknown is "—"; a box that does not answer, or
whose sample is stale, shows its status and reason where its figures would be."""

from __future__ import annotations

from vramtop.core.fleet_rows import BoxRow, Status
from vramtop.tui.format import gib

COLUMNS: tuple[str, ...] = (
    "box",
    "card",
    "platform",
    "server",
    "budget",
    "max len",
    "headroom",
    "KV",
    "tok/s/req",
    "findings",
    "door",
    "guard",
    "age",
)
UNKNOWN = "—"


def cells(row: BoxRow) -> tuple[str, ...]:
    """The row's cells, in `COLUMNS`' order."""
    if row.status is not Status.UP:
        words = row.status.value.replace("_", " ")
        blank = ("",) * (len(COLUMNS) - 3)
        return (row.name, f"{words}: {row.problem or ''}".rstrip(": "), *blank, age(row))
    return (
        row.name,
        row.card or UNKNOWN,
        row.platform.value if row.platform is not None else UNKNOWN,
        row.server_state or UNKNOWN,
        budget(row),
        UNKNOWN if row.max_model_len is None else f"{row.max_model_len:,}",
        gib(row.headroom_bytes) + (" GiB" if row.headroom_bytes is not None else ""),
        UNKNOWN if row.kv_usage is None else f"{row.kv_usage:.0%}",
        rate(row),
        findings(row),
        door(row),
        row.guard or UNKNOWN,
        age(row),
    )


def budget(row: BoxRow) -> str:
    if row.budget_bytes is None and row.budget_ratio is None:
        return UNKNOWN
    ratio = "" if row.budget_ratio is None else f" ({row.budget_ratio:.2f})"
    return f"{gib(row.budget_bytes)} GiB{ratio}" if row.budget_bytes is not None else ratio[2:-1]


def rate(row: BoxRow) -> str:
    """Tokens/s per request against its normal: `38/41`; `—` while none is decoding."""
    if row.request_tps is None:
        return UNKNOWN
    normal = UNKNOWN if row.request_normal_tps is None else f"{row.request_normal_tps:.0f}"
    return f"{row.request_tps:.0f}/{normal}"


def findings(row: BoxRow) -> str:
    if not row.open_findings:
        return "none"
    return " ".join(
        "collapse" if row.collapse and k == "vram_contention" else k for k in row.open_findings
    )


def door(row: BoxRow) -> str:
    if row.door_held is None:
        return UNKNOWN
    return f"holding {row.door_held}" if row.door_held else f"{row.door_in_flight or 0} in flight"


def age(row: BoxRow) -> str:
    return UNKNOWN if row.sample_age_s is None else f"{row.sample_age_s:.0f}s"


def table_text(rows: list[BoxRow]) -> str:
    """The rows as plain text columns (`vramtop fleet --once`)."""
    up = [COLUMNS, *(cells(row) for row in rows if row.status is Status.UP)]
    widths = [max(len(line[i]) for line in up) for i in range(len(COLUMNS))]
    lines = []
    for line in [COLUMNS, *(cells(row) for row in rows)]:
        if line is COLUMNS or line in up:
            padded = (cell.ljust(width) for cell, width in zip(line, widths, strict=True))
            lines.append("  ".join(padded).rstrip())
        else:  # a box without figures: its name, then what is wrong, across the columns
            lines.append(f"{line[0].ljust(widths[0])}  {line[1]}")
    return "\n".join(lines)
