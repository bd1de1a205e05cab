"""Detection latency: from the onset of a field-report collapse to the vram_contention finding.

Generates the field report at 1 Hz (WSL2 and native presentations, several onset times) and
prints the latency of each and the worst. Target: under 10 s.

    python bench/bench_detection.py
"""

from __future__ import annotations

import time

from vramtop.core.diagnosis import VRAM_CONTENTION, Diagnoser
from vramtop.session.synthetic import Card, build, field_report

TARGET_S = 10.0


def latency(onset: float, wsl: bool) -> float | None:
    d = Diagnoser()
    for record in build(Card(wsl=wsl), field_report(call_at=onset, restart_at=onset + 200)):
        if isinstance(record, tuple):
            d.feed_event(*record)
            continue
        d.feed_sample(record)
        for change in d.take_changes():
            if change.change == "opened" and change.finding.kind == VRAM_CONTENTION:
                return record.t - onset
    return None


def main() -> None:
    began = time.perf_counter()
    worst = 0.0
    for wsl in (True, False):
        for onset in (30.0, 60.0, 121.0, 300.0):
            found = latency(onset, wsl)
            label = "wsl2  " if wsl else "native"
            print(f"{label} onset {onset:5.0f} s: detected after {found} s")
            worst = max(worst, found if found is not None else float("inf"))
    print(
        f"worst detection latency: {worst:.1f} s "
        f"(target < {TARGET_S:.0f} s, ratio {worst / TARGET_S:.2f})"
    )
    print(f"run time: {time.perf_counter() - began:.2f} s")


if __name__ == "__main__":
    main()
