"""`vramtop record`'s loop on the headless runner: it ends at its duration, on a recording
that failed, or with the error of a tick that raised (as before the runner)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtop.commands.record import record_loop
from vramtop.core.model import GIB, GpuDevice, GpuReading, Sample
from vramtop.machines.interface import Backend, Frame
from vramtop.session.session_reader import read_session
from vramtop.session.writer import SessionWriter

CARD = GpuReading(devices=(GpuDevice(0, "sim card", 32 * GIB, 10 * GIB, 22 * GIB),), source="sim")


class Counting(Backend):
    """A tick a second of its own clock; raises at tick `broken` (0: never)."""

    def __init__(self, broken: int = 0) -> None:
        self.ticks = 0
        self.broken = broken

    def tick(self, log_limit: int = 0) -> Frame:
        self.ticks += 1
        if self.ticks == self.broken:
            raise RuntimeError("a source broke")
        return Frame(Sample(t=float(self.ticks), gpu=CARD))

    def close(self, stop_server: bool) -> None:
        pass


def test_the_loop_ends_at_its_duration_without_a_last_sleep(tmp_path: Path) -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    backend = Counting()
    path = tmp_path / "rec.jsonl"
    with SessionWriter(path, {"started_at": "x"}) as writer:
        record_loop(backend, writer, duration_s=3.0, clock=lambda: now[0], sleep=sleep)
    _, records = read_session(path)
    assert backend.ticks == 4  # at 0, 1, 2 and 3 s: the fourth reaches the duration
    assert slept == [1.0, 1.0, 1.0]
    assert [r.t for r in records if isinstance(r, Sample)] == [1.0, 2.0, 3.0, 4.0]


def test_a_tick_that_raises_ends_the_recording_with_its_error(tmp_path: Path) -> None:
    backend = Counting(broken=3)
    with (
        SessionWriter(tmp_path / "rec.jsonl", {"started_at": "x"}) as writer,
        pytest.raises(RuntimeError, match="a source broke"),
    ):
        record_loop(backend, writer, sleep=lambda seconds: None)
    assert backend.ticks == 3  # not tried again
