"""Detection latency: from the onset of a field-report collapse to the vram_contention finding.

Synthetic (default): generates the field report at 1 Hz (WSL2 and native presentations,
several onset times) and prints the latency of each and the worst. Target: under 10 s.

`--demo`: the real product on the simulated machine (its coding agent, its fake vLLM, its
GPU), a private VRAMTOP_HOME, time run `--speed` times faster and one tick per simulated
second. A call starts `--onsets` simulated seconds after the server is ready (the first
ones inside the first minute, before much was learned); the latency is timed from the
simulator's onset (the call switched on) to the finding, in simulated seconds. Each onset is
run twice: on a fresh home (nothing remembered) and again with the normal rate the first run
remembered (a console reopened mid-collapse would start from it).

    python bench/bench_detection.py
    python bench/bench_detection.py --demo [--speed 10] [--onsets 20,45,90] [--wsl]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

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


# The simulator's onset of the collapse: the simulated engine decodes this much slower than
# it can (its memory started to spill), read from the simulated machine itself.
ONSET_RATE_FACTOR = 0.9


def demo_latency(
    onset: float, speed: float, wsl: bool, home: Path
) -> tuple[float | None, float | None, str]:
    """Simulated seconds from the call switched on and from the simulator's onset of the
    collapse to the finding (None: not detected), and where the normal rate came from."""
    os.environ["VRAMTOP_HOME"] = str(home)
    os.environ["VRAMTOP_SIM_SPEED"] = str(speed)
    os.environ.setdefault("VRAMTOP_SIM_STARTUP_S", "0.3")
    from vramtop.machines.demo_backend import demo_backend
    from vramtop.machines.demo_world import demo_machine

    backend, _ = demo_backend(wsl=wsl)
    machine = demo_machine(wsl)
    try:
        if backend.autostart and not backend.start().ok:
            return None, None, "the simulated server did not start"
        tick = 1.0 / speed
        ready = time.monotonic()
        call_at: float | None = None
        collapse_at: float | None = None
        while time.monotonic() - ready < (onset + 60) / speed:
            began = time.monotonic()
            backend.tick()
            if call_at is None and began - ready >= onset / speed:
                backend.toggle_call()
                call_at = began
            if call_at is not None and collapse_at is None:
                servers = machine.state().get("servers", [])
                if any(sv["rate_factor"] < ONSET_RATE_FACTOR for sv in servers):
                    collapse_at = began
            if call_at is not None:
                found = [f for f in backend.findings() if f.kind == VRAM_CONTENTION]
                if found:
                    normal = backend.normal_rate()
                    origin = normal.source if normal is not None else "none (memory evidence)"
                    now = time.monotonic()
                    since_collapse = None if collapse_at is None else (now - collapse_at) * speed
                    return (now - call_at) * speed, since_collapse, origin
            time.sleep(max(0.0, tick - (time.monotonic() - began)))
        return None, None, "not detected"
    finally:
        backend.close(stop_server=True)


def demo_main(speed: float, onsets: list[float], wsl: bool) -> None:
    began = time.process_time()
    worst = worst_call = 0.0
    for onset in onsets:
        home = Path(tempfile.mkdtemp(prefix="vramtop-bench-"))
        try:
            for run in ("fresh", "reopened"):
                from_call, found, origin = demo_latency(onset, speed, wsl, home)
                print(
                    f"demo{' wsl2' if wsl else ''} call at {onset:4.0f} s ({run}): detected "
                    f"{'never' if found is None else f'{found:.1f} s'} after the collapse's "
                    f"onset, {'never' if from_call is None else f'{from_call:.1f} s'} after "
                    f"the call was switched on (normal rate: {origin})"
                )
                worst = max(worst, found if found is not None else float("inf"))
                worst_call = max(worst_call, from_call if from_call is not None else float("inf"))
        finally:
            shutil.rmtree(home, ignore_errors=True)
    print(
        f"worst detection latency: {worst:.1f} s simulated from the collapse's onset "
        f"(target < {TARGET_S:.0f} s, ratio {worst / TARGET_S:.2f}), {worst_call:.1f} s from "
        f"the call's switch (its memory ramps up over 20 s); speed ×{speed:g}, "
        f"this process's CPU {time.process_time() - began:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--demo", action="store_true", help="time the simulated machine")
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--onsets", default="20,45,90", help="simulated seconds after ready")
    parser.add_argument("--wsl", action="store_true", help="the demo presented the WSL2 way")
    args = parser.parse_args()
    if args.demo:
        demo_main(args.speed, [float(x) for x in args.onsets.split(",")], args.wsl)
        return
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
