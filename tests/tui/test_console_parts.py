"""The console's parts on their own: the state value, the reader's counting, the panels'
histories, and the App composed of them rather than stacked on them."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import pytest
from textual.app import App
from textual.message import Message

from tests.support.console import make_app, ticks
from tests.support.fake_backend import FakeBackend
from vramtop.core.model import Sample
from vramtop.machines.interface import LOG_KEPT, LOG_TAIL, Frame
from vramtop.tui.app import VramtopApp
from vramtop.tui.console_state import RESULT_SHOWN_S, ConsoleState
from vramtop.tui.messages import SampleArrived, TickFailed
from vramtop.tui.reader import Reader
from vramtop.tui.widgets.kv_pool_panel import KvPoolPanel
from vramtop.tui.widgets.throughput_panel import ThroughputPanel


def test_the_app_derives_from_textual_alone() -> None:
    # Composed, not stacked: no class of vramtop's between the console and Textual's App.
    ours = [c for c in VramtopApp.__mro__[1:] if c.__module__.startswith("vramtop")]
    assert ours == []
    assert App in VramtopApp.__mro__


def test_the_state_is_a_value_replaced_on_each_change() -> None:
    backend = FakeBackend()
    state = ConsoleState()
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.activity = "x"  # type: ignore[misc]
    frame = backend.tick(LOG_TAIL)
    shown = state.arrived(frame, "learned now")
    assert state.sample is None and shown.sample is frame.sample  # the old value unchanged
    assert shown.findings == frame.findings and shown.normal_origin == "learned now"
    # The desktop's peak is the largest share seen, not the latest.
    split = frame.sample.split
    assert split is not None and split.desktop_bytes is not None
    smaller = replace(split, desktop_bytes=split.desktop_bytes // 2)
    later = shown.arrived(replace(frame, sample=replace(frame.sample, split=smaller)), None)
    assert later.desktop_peak_bytes == split.desktop_bytes
    # News fades after RESULT_SHOWN_S; progress stays.
    assert shown.said("done", 100.0).activity_until == 100.0 + RESULT_SHOWN_S
    assert shown.said("loading", 100.0, news=False).activity_until is None
    # Said after a result: after it while it is news, said again after the same result, and
    # alone once it has faded.
    failed = shown.said("done", 100.0).said("failed", 101.0, after=True)
    assert failed.said("failed", 102.0, after=True).activity == "done · failed"
    assert failed.activity_until == 100.0 + RESULT_SHOWN_S
    assert failed.said("failed", 100.0 + RESULT_SHOWN_S, after=True).activity == "failed"
    assert shown.said("failed", 100.0, after=True).said("failed", 101.0, after=True).activity == (
        "failed"
    )


class _Broken(FakeBackend):
    def tick(self, log_limit: int = LOG_TAIL) -> Frame:
        raise RuntimeError("no socket")


def test_the_reader_counts_asks_and_answers_and_reads_the_whole_log_first() -> None:
    posted: list[Message] = []
    limits: list[int] = []

    class Counting(FakeBackend):
        def tick(self, log_limit: int = LOG_TAIL) -> Frame:
            limits.append(log_limit)
            return super().tick(log_limit)

    backend = Counting()
    reader = Reader(backend, posted.append, backend.clock, quiet=lambda: False)
    assert not reader.reads_pending
    reader.request_tick()
    reader.request_tick()
    assert reader.reads_pending
    reader.read(2)  # what the thread does once woken: one read answers both asks
    (arrived,) = posted
    assert isinstance(arrived, SampleArrived) and arrived.answers == 2 and arrived.log_kept
    assert reader.reads_pending  # until the handler has shown it
    reader.answered(arrived.answers)
    assert not reader.reads_pending
    reader.read(2)
    reader.want_kept_lines()
    reader.read(2)
    assert limits == [LOG_KEPT, LOG_TAIL, LOG_KEPT]


def test_a_failed_read_is_posted_not_raised() -> None:
    posted: list[Message] = []
    backend = _Broken()
    reader = Reader(backend, posted.append, backend.clock, quiet=lambda: True)
    reader.read(1)
    (failed,) = posted
    assert isinstance(failed, TickFailed) and failed.answers == 1
    assert failed.reason == "RuntimeError: no socket"


async def test_the_panels_keep_the_history_they_draw_one_value_a_new_sample() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 3)
        panel = app.query_one(ThroughputPanel)
        history = panel.generation_history
        assert len(history) == 4  # the first read and three ticks
        sample = app.sample
        assert isinstance(sample, Sample)
        frame = app.shown.frame
        panel.show(frame)  # the same frame again (a replay's last): no new value
        assert panel.generation_history == history
        later = replace(sample, t=sample.t + 1, rates=replace(sample.rates, generation_tps=7.0))
        panel.show(replace(frame, sample=later))
        assert panel.generation_history == (*history, 7.0)
        # The App keeps no history of its own: only the panels' deques hold the values.
        assert not [v for v in vars(app).values() if type(v).__name__ == "deque"]
        assert app.query_one(KvPoolPanel)._usage  # the KV pool panel keeps its usage
