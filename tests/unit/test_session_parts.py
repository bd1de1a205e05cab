"""A live session's two helpers on their own: its journal (the events kept, the recording
written) and its normal memory (the normal rate kept between runs)."""

from __future__ import annotations

from pathlib import Path

from tests.support.synthetic import Card, build, busy
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.diagnosis.normal_rate import NormalRate
from vramtop.core.model import Sample
from vramtop.session.journal import EVENTS_KEPT, SessionJournal
from vramtop.session.normal_memory import SAVE_EVERY_S, NormalMemory
from vramtop.session.normal_store import NormalRateStore
from vramtop.session.session_reader import read_session
from vramtop.session.writer import SessionWriter, make_header


def test_the_journal_keeps_the_latest_events_and_records_while_it_can(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    writer = SessionWriter(path, make_header(started_at="2026-12-01T00:00:00Z"))
    journal = SessionJournal(writer)
    for t in range(EVENTS_KEPT + 5):
        journal.event(float(t), "restart", {"n": t})
    assert len(journal.events) == EVENTS_KEPT and journal.events[0].t == 5.0
    writer.failed = "No space left on device"  # as a write that failed leaves it
    journal.check_writes(9999.0)
    journal.check_writes(10000.0)
    assert journal.writer is None and journal.error is not None and str(path) in journal.error
    assert [e.t for e in journal.events if e.name == "recording_failed"] == [9999.0]
    writer.close()
    _header, records = read_session(path)
    assert len(records) == EVENTS_KEPT + 5  # every event written before the failure


class CountingStore(NormalRateStore):
    """A real store that also keeps the sample time of each save."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.now = 0.0
        self.saved_at: list[float] = []

    def save(self, key: str, rate: NormalRate) -> None:
        self.saved_at.append(self.now)
        super().save(key, rate)


def test_the_normal_memory_saves_a_learned_normal_at_most_once_a_minute_and_at_close(
    tmp_path: Path,
) -> None:
    store = CountingStore(tmp_path / "normal_rates.json")
    diagnoser = Diagnoser()
    memory = NormalMemory(diagnoser, store)
    for s in build(Card(), [busy(float(t), decode_tps=77.0 + (t % 3)) for t in range(1, 200)]):
        if isinstance(s, Sample):
            store.now = s.t
            diagnoser.feed_sample(s)
            memory.sync(s.t)
    gaps = [b - a for a, b in zip(store.saved_at, store.saved_at[1:], strict=False)]
    assert len(store.saved_at) >= 2 and all(gap >= SAVE_EVERY_S for gap in gaps)
    memory.save(None, force=True)  # the session closes
    assert len(store.saved_at) == len(gaps) + 2
    assert NormalRateStore(tmp_path / "normal_rates.json").load(diagnoser.decode_key or "")
