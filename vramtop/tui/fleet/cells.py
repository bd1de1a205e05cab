"""How one box's row reads, cell by cell: the fleet console's table and `vramtop fleet
--once` without --json show the same words. Unknown is "—"; a box that does not answer, or
whose sample is stale, shows its status and reason where its figures would be."""

from __future__ import annotations

from vramtop.core.fleet_rows import BoxRow, Status
from vramtop.core.rate_figures import rate_text
from vramtop.tui.format import gib

# Most telling first: at 80 columns the table shows up to the headroom, the rest scrolls.
COLUMNS: tuple[str, ...] = (
    "box",
    "age",
    "card",
    "server",
    "findings",
    "tok/s/req",
    "KV",
    "headroom",
    "budget",
    "max len",
    "door",
    "guard",
    "platform",
    "note",
)
UNKNOWN = "—"
# Words a card's name starts with that every card of its maker shares: left out of the table
# (the JSON keeps the whole name).
_MAKERS = ("NVIDIA", "GeForce", "AMD", "Radeon")


def cells(row: BoxRow) -> tuple[str, ...]:
    """The row's cells, in `COLUMNS`' order; a box without a fresh sample: its status where
    the card would be and the reason in the note, no figure."""
    if row.status is not Status.UP:
        blank = ("",) * (len(COLUMNS) - 4)
        return (row.name, age(row), row.status.value.replace("_", " "), *blank, row.problem or "")
    return (
        row.name,
        age(row),
        short_card(row.card),
        row.server_state or UNKNOWN,
        findings(row),
        rate(row),
        UNKNOWN if row.kv_usage is None else f"{row.kv_usage:.0%}",
        UNKNOWN if row.headroom_bytes is None else f"{gib(row.headroom_bytes)}G",
        budget(row),
        UNKNOWN if row.max_model_len is None else f"{row.max_model_len:,}",
        door(row),
        row.guard or UNKNOWN,
        row.platform.value if row.platform is not None else UNKNOWN,
        "",
    )


def short_card(name: str | None) -> str:
    if name is None:
        return UNKNOWN
    words = name.split()
    while len(words) > 1 and words[0] in _MAKERS:
        words = words[1:]
    return " ".join(words)


def budget(row: BoxRow) -> str:
    if row.budget_bytes is None and row.budget_ratio is None:
        return UNKNOWN
    ratio = "" if row.budget_ratio is None else f"{row.budget_ratio:.2f}"
    size = "" if row.budget_bytes is None else f"{gib(row.budget_bytes)}G"
    return " ".join(part for part in (size, ratio) if part)


def rate(row: BoxRow) -> str:
    """Tokens/s per request against its normal: `38/41`; `—` while none is decoding."""
    if row.request_tps is None:
        return UNKNOWN
    return f"{rate_text(row.request_tps)}/{rate_text(row.request_normal_tps)}"


def findings(row: BoxRow) -> str:
    if not row.open_findings:
        return "none"
    return " ".join(
        "collapse" if row.collapse and k == "vram_contention" else k for k in row.open_findings
    )


def door(row: BoxRow) -> str:
    if row.door_held is None:
        return UNKNOWN
    return f"holding {row.door_held}" if row.door_held else f"{row.door_in_flight or 0} in"


def age(row: BoxRow) -> str:
    return UNKNOWN if row.sample_age_s is None else f"{row.sample_age_s:.0f}s"


def down_words(row: BoxRow) -> str:
    """A box without a fresh sample, in words: its status and why (`unreachable: no answer
    (refused)`); the console shows them below the banner, whole, for each such box."""
    words = row.status.value.replace("_", " ")
    return f"{words}: {row.problem}" if row.problem else words


def table_text(rows: list[BoxRow]) -> str:
    """The rows as plain text columns (`vramtop fleet --once`); a box without figures: its
    name, status and reason on its line."""
    up = [cells(row)[:-1] for row in rows if row.status is Status.UP]
    header = COLUMNS[:-1]
    widths = [max(len(line[i]) for line in (header, *up)) for i in range(len(header))]

    def line(values: tuple[str, ...]) -> str:
        padded = (cell.ljust(width) for cell, width in zip(values, widths, strict=True))
        return "  ".join(padded).rstrip()

    lines = [line(header)]
    for row in rows:
        if row.status is Status.UP:
            lines.append(line(cells(row)[:-1]))
        else:
            lines.append(f"{row.name.ljust(widths[0])}  {down_words(row)}")
    return "\n".join(lines)
