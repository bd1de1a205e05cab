"""gpu_throttling: the card slows its clocks (heat, power brake), so the slowdown is not memory."""

from __future__ import annotations

from typing import Any

from vramtop.core.model import GpuDevice


def throttle_report(
    device: GpuDevice, reasons: list[str], generation_tps: float | None
) -> dict[str, Any]:
    """The finding's fields; `reasons` are the slowdown reasons the card reports (may be none
    when it is only hot and slow)."""
    what = ", ".join(reasons) if reasons else f"{device.temperature_c} °C"
    return {
        "severity": "warning",
        "summary": f"The GPU is throttling its clocks ({what}): the slowdown is not memory.",
        "evidence": {
            "throttle": reasons,
            "temperature_c": device.temperature_c,
            "sm_clock_mhz": device.sm_clock_mhz,
            "generation_tps": generation_tps,
        },
        "ruled_out": {},
        "ladder": {
            "observed": [f"clock throttle reasons: {what}"],
            "inferred": ["the GPU runs slower than it can"],
            "hypothesis": [],
        },
        "remedy": {
            "action": "cool_down",
            "why": "improve cooling or airflow, or lower the power limit; "
            "memory settings will not help",
        },
    }
