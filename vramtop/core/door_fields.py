"""The front door's report as a `DoorReading`, and a `DoorReading` as JSON.

One shape everywhere it is written: `--once --json`'s `front_door` object and the recordings'
per-sample `door` field carry the same keys as the door's own `GET /vramtop/door` (those the
reading keeps) plus `address`. Pure: a parsed JSON object in, a value out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from vramtop.core.json_types import JsonObject
from vramtop.core.model import DoorReading

_COUNTS = ("in_flight", "held", "served", "failed")
_SECONDS = ("ttft_p50_s", "ttft_p95_s", "e2e_p50_s", "e2e_p95_s")


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if value >= 0 else None


def _figure(value: object) -> float | None:
    """A non-negative finite number, else None (not measured, or not the door's)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def door_from_json(address: str, obj: Mapping[str, object]) -> DoorReading | None:
    """The door's answer as a reading; None when it is not one (no `in_flight` count: another
    program's JSON, or a damaged line). A figure that is missing or wrong is not known."""
    in_flight = _count(obj.get("in_flight"))
    if in_flight is None:
        return None
    counts = {name: _count(obj.get(name)) or 0 for name in _COUNTS}
    seconds = {name: _figure(obj.get(name)) for name in _SECONDS}
    return DoorReading(
        address=address,
        holding=obj.get("holding") is True,
        in_flight=in_flight,
        held=counts["held"],
        served=counts["served"],
        failed=counts["failed"],
        longest_hold_s=_figure(obj.get("longest_hold_s")) or 0.0,
        ttft_p50_s=seconds["ttft_p50_s"],
        ttft_p95_s=seconds["ttft_p95_s"],
        e2e_p50_s=seconds["e2e_p50_s"],
        e2e_p95_s=seconds["e2e_p95_s"],
        decode_tps_p50=_figure(obj.get("decode_tps_p50")),
    )


def door_json(door: DoorReading) -> JsonObject:
    """A reading as `--once --json`'s `front_door` and a recording's `door` write it."""
    return {
        "address": door.address,
        "holding": door.holding,
        "in_flight": door.in_flight,
        "held": door.held,
        "served": door.served,
        "failed": door.failed,
        "longest_hold_s": door.longest_hold_s,
        "ttft_p50_s": door.ttft_p50_s,
        "ttft_p95_s": door.ttft_p95_s,
        "e2e_p50_s": door.e2e_p50_s,
        "e2e_p95_s": door.e2e_p95_s,
        "decode_tps_p50": door.decode_tps_p50,
    }
