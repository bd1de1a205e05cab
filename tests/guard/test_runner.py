"""The headless runner: what changed between two ticks, and its pace."""

from __future__ import annotations

from dataclasses import replace

import pytest

from vramtop.core.findings import VRAM_CONTENTION, Finding
from vramtop.core.model import GpuReading, Sample
from vramtop.core.server_events import Event
from vramtop.machines.headless_runner import MAX_FAILURES, Runner
from vramtop.machines.interface import LOG_TAIL, Backend, Frame


def finding(first_seen: float, kind: str = VRAM_CONTENTION) -> Finding:
    return Finding(kind, "critical", first_seen, first_seen, None, "squeezed")


class Scripted(Backend):
    """Each tick returns the next scripted frame."""

    def __init__(self, frames: list[Frame]) -> None:
        self.frames = frames
        self.ticks = 0

    def tick(self, log_limit: int = LOG_TAIL) -> Frame:
        frame = self.frames[min(self.ticks, len(self.frames) - 1)]
        self.ticks += 1
        if isinstance(frame, Exception):
            raise frame
        return frame

    def close(self, stop_server: bool) -> None:
        return None


def frame(t: float, findings: tuple[Finding, ...] = (), events: tuple[Event, ...] = ()) -> Frame:
    return Frame(sample=Sample(t=t, gpu=GpuReading()), findings=findings, events=events)


def test_findings_open_and_close_by_id_and_events_are_new_once() -> None:
    a, b = finding(1.0), finding(2.0)
    start, ready = Event(0.0, "start"), Event(0.5, "ready")
    same_time = Event(0.5, "ready")  # equal to `ready`, still another event
    frames = [
        frame(1.0, (a,), (start,)),
        frame(2.0, (replace(a, last_seen_t=2.0), b), (start, ready)),
        frame(3.0, (b,), (start, ready, same_time)),
        frame(4.0, (), (start, ready, same_time)),
    ]
    runner = Runner(Scripted(frames), interval_s=1.0)
    first = runner.tick()
    assert first.opened == (a,) and first.closed == () and first.new_events == (start,)
    second = runner.tick()
    # `a` seen again with a later last_seen_t is the same finding: not opened twice.
    assert second.opened == (b,) and second.closed == () and second.new_events == (ready,)
    third = runner.tick()
    assert third.opened == () and [f.first_seen_t for f in third.closed] == [1.0]
    assert len(third.new_events) == 1 and third.new_events[0] is same_time
    fourth = runner.tick()
    assert [f.first_seen_t for f in fourth.closed] == [2.0] and fourth.new_events == ()


def test_run_paces_steps_and_stops_when_asked() -> None:
    now = [0.0]
    slept: list[float] = []

    def clock() -> float:
        return now[0]

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    backend = Scripted([frame(float(n)) for n in range(10)])
    seen: list[float] = []

    def on_tick(step: object) -> None:
        now[0] += 0.25  # each step takes a quarter of the interval
        seen.append(now[0])

    runner = Runner(backend, interval_s=1.0, clock=clock, sleep=sleep)
    runner.run(lambda: len(seen) >= 3, on_tick)
    assert len(seen) == 3 and backend.ticks == 3
    assert slept == [0.75, 0.75]  # the rest of each interval; none after the last step


def test_a_failing_step_is_logged_and_the_next_tried_until_too_many_in_a_row() -> None:
    backend = Scripted([RuntimeError("bad tick"), frame(1.0)])  # type: ignore[list-item]
    seen: list[float] = []
    runner = Runner(backend, interval_s=0.01, sleep=lambda s: None)
    runner.run(lambda: len(seen) >= 2, lambda step: seen.append(step.frame.sample.t))
    assert seen == [1.0, 1.0] and backend.ticks == 3

    always = Scripted([RuntimeError("always")])  # type: ignore[list-item]
    runner = Runner(always, interval_s=0.01, sleep=lambda s: None)
    with pytest.raises(RuntimeError, match="always"):
        runner.run(lambda: False, lambda step: None)
    assert always.ticks == MAX_FAILURES


def test_an_interval_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Runner(Scripted([frame(0.0)]), interval_s=0)
