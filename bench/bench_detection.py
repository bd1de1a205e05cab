"""Detection latency: from the onset of a field-report collapse to the vram_contention finding.

Synthetic (default): generates the field report at 1 Hz (WSL2 and native presentations,
several onset times) and prints the latency of each and the worst. Target: under 10 s.

`--demo`: the real product on the simulated machine (its coding agent, its fake vLLM, its
GPU), a private VRAMTOP_HOME, time run `--speed` times faster and one tick per simulated
second. A call starts `--onsets` simulated seconds after the server is ready (the first
ones inside the first minute, before much was learned); the latency is timed on the
simulated machine's own clock from the onset (the first simulated second the card's memory
slowed the simulated engine's decoding below 90 %, as the simulator records it) to the
finding, and broken down from the call's switch: onset, decode under a third of its speed,
finding. Each onset is run twice: on a fresh home (nothing remembered) and again with the
normal rate the first run remembered (a console reopened mid-collapse would start from it).

    python -m bench.bench_detection
    python -m bench.bench_detection --demo [--speed 10] [--onsets 20,45,90] [--wsl]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.synthetic import Card, build, field_report
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.findings import VRAM_CONTENTION

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


@dataclass
class DemoRun:
    """Simulated seconds from the call's switch to the onset (the simulated engine decoding
    below 90 % of its speed because of the card's memory), to its fall under a third, and to
    the finding (None: not reached); where the normal rate came from."""

    onset: float | None = None
    under_a_third: float | None = None
    found: float | None = None
    origin: str = "not detected"

    @property
    def latency(self) -> float | None:
        """From the onset to the finding: the figure the target is about."""
        if self.found is None or self.onset is None:
            return None
        return self.found - self.onset


def demo_latency(onset: float, speed: float, wsl: bool, home: Path) -> DemoRun:
    """One run of the demo with a call `onset` simulated seconds after the server is ready,
    timed on the simulated machine's own clock."""
    os.environ["VRAMTOP_HOME"] = str(home)
    os.environ["VRAMTOP_SIM_SPEED"] = str(speed)
    os.environ.setdefault("VRAMTOP_SIM_STARTUP_S", "0.3")
    from vramtop.machines.demo_backend import demo_backend
    from vramtop.machines.demo_world import demo_machine

    backend, _ = demo_backend(wsl=wsl)
    machine = demo_machine(wsl)
    run = DemoRun()
    try:
        if backend.autostart and not backend.start().ok:
            run.origin = "the simulated server did not start"
            return run
        tick = 1.0 / speed
        ready = time.monotonic()
        call_at: float | None = None
        while time.monotonic() - ready < (onset + 60) / speed:
            began = time.monotonic()
            backend.tick()
            if call_at is None and began - ready >= onset / speed:
                backend.toggle_call()
                call_at = machine.client.request("ping")["t"]
            if call_at is not None and any(
                f.kind == VRAM_CONTENTION for f in backend.session.findings()
            ):
                # The simulated clock now: at or after the sample that opened the finding.
                state = machine.state()
                servers = state.get("servers", [])
                slowed = [at for sv in servers if (at := sv.get("slowed_at")) is not None]
                third = [at for sv in servers if (at := sv.get("collapsed_at")) is not None]
                run.onset = min(slowed) - call_at if slowed else None
                run.under_a_third = min(third) - call_at if third else None
                run.found = state["t"] - call_at
                normal = backend.session.normal_rate()
                run.origin = normal.source if normal is not None else "none (memory evidence)"
                return run
            time.sleep(max(0.0, tick - (time.monotonic() - began)))
        return run
    finally:
        backend.close(stop_server=True)


def _s(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f} s"


def demo_main(speed: float, onsets: list[float], wsl: bool) -> None:
    began = time.process_time()
    worst = 0.0
    for onset in onsets:
        home = Path(tempfile.mkdtemp(prefix="vramtop-bench-"))
        try:
            for label in ("fresh", "reopened"):
                run = demo_latency(onset, speed, wsl, home)
                print(
                    f"demo{' wsl2' if wsl else ''} call at {onset:4.0f} s ({label}): detected "
                    f"{_s(run.latency)} after the onset; from the call's switch: onset "
                    f"{_s(run.onset)}, decode under a third {_s(run.under_a_third)}, finding "
                    f"{_s(run.found)} (normal rate: {run.origin})"
                )
                worst = max(worst, run.latency if run.latency is not None else float("inf"))
        finally:
            shutil.rmtree(home, ignore_errors=True)
    print(
        f"worst detection latency: {worst:.1f} s simulated from the onset "
        f"(target < {TARGET_S:.0f} s, ratio {worst / TARGET_S:.2f}); speed ×{speed:g}, "
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
