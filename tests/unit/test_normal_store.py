"""A normal rate remembered between runs: the store, the live session, recordings, diagnose."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from tests.support.synthetic import Card, Tick, build, busy
from vramtop.commands.diagnose import diagnose_file
from vramtop.core.diagnosis.normal_rate import INTER_TOKEN_LATENCY, LEARNED, REMEMBERED, NormalRate
from vramtop.core.findings import VRAM_CONTENTION
from vramtop.core.model import GIB, Sample
from vramtop.session.live import LiveSession
from vramtop.session.normal_store import NormalRateStore
from vramtop.session.session_reader import SessionReader
from vramtop.session.writer import SessionWriter, make_header

CALL = int(4.3 * GIB)


def samples(ticks: list[Tick], card: Card | None = None) -> list[Sample]:
    return [s for s in build(card or Card(), ticks) if isinstance(s, Sample)]


def healthy(start: int, end: int) -> list[Tick]:
    return [busy(float(t), decode_tps=77.0 + (t % 3)) for t in range(start, end)]


def collapsed(start: int, end: int) -> list[Tick]:
    return [busy(float(t), tps=8.0, decode_tps=8.0, desktop_bytes=CALL) for t in range(start, end)]


def test_store_round_trip_is_private_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / "normal_rates.json"
    store = NormalRateStore(path, clock=lambda: 5000.0)
    rate = NormalRate({INTER_TOKEN_LATENCY: {1: 77.0}}, LEARNED)
    for i in range(70):
        store.save(f"key{i}", rate)
    loaded = store.load("key69")
    assert loaded is not None and loaded.source == REMEMBERED and loaded.saved_at == 5000.0
    assert loaded.tps == 77.0 and loaded.key == "key69"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(json.loads(path.read_text())["rates"]) <= 64
    assert store.load("unknown") is None


def test_a_damaged_store_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "normal_rates.json"
    path.write_text("{not json")
    store = NormalRateStore(path)
    assert store.load("k") is None
    store.save("k", NormalRate({INTER_TOKEN_LATENCY: {1: 70.0}}))  # and replaced whole
    assert store.load("k") is not None


def test_a_reopened_console_compares_with_the_last_run_from_the_first_second(
    tmp_path: Path,
) -> None:
    store = NormalRateStore(tmp_path / "normal_rates.json", clock=lambda: 1000.0)
    first = LiveSession(normal_store=store)
    for s in samples(healthy(1, 80)):
        first.observe(s)
    first.close()  # quit, leaving the server running
    learned = first.normal_rate()
    assert learned is not None and learned.source == LEARNED

    # Reopened while a call already squeezes the server: no healthy second in this run.
    second = LiveSession(normal_store=NormalRateStore(tmp_path / "normal_rates.json"))
    opened_at = 200
    for s in samples(collapsed(opened_at, opened_at + 20)):
        second.observe(s)
    normal = second.normal_rate()
    assert normal is not None and normal.source == REMEMBERED and normal.saved_at == 1000.0
    found = [f for f in second.all_findings() if f.kind == VRAM_CONTENTION]
    assert found and found[0].first_seen_t <= opened_at + 15


def test_without_a_store_nothing_is_remembered(tmp_path: Path) -> None:
    session = LiveSession()
    for s in samples(collapsed(1, 30)):
        session.observe(s)
    normal = session.normal_rate()  # what this run saw is all it knows: nothing remembered
    assert normal is not None and normal.source == LEARNED
    assert session.all_findings() == []


def test_a_recording_carries_the_normal_rate_and_diagnose_uses_it(tmp_path: Path) -> None:
    normal = NormalRate({INTER_TOKEN_LATENCY: {1: 77.0}}, REMEMBERED, saved_at=1000.0)
    path = tmp_path / "mid-collapse.jsonl"
    header = make_header(started_at="2026-11-30T20:00:00Z", extra={"normal_rate": normal.to_json()})
    with SessionWriter(path, header) as writer:
        for s in samples(collapsed(1, 30)):
            writer.sample(s)
    reader = SessionReader(path)
    assert reader.header.normal_rate is not None
    assert reader.header.normal_rate.by_measure == normal.by_measure
    # The latency histogram's fields survive the file.
    last = [r for r in reader.records() if isinstance(r, Sample)][-1]
    assert last.server is not None and last.server.metrics is not None
    assert last.server.metrics.inter_token_latency_count is not None
    assert [f.kind for f in diagnose_file(path)] == [VRAM_CONTENTION]

    without = tmp_path / "no-rate.jsonl"
    with SessionWriter(without, make_header(started_at="2026-11-30T20:00:00Z")) as writer:
        for s in samples(collapsed(1, 30)):
            writer.sample(s)
    assert diagnose_file(without) == []  # nothing to compare with, nothing invented


def test_a_store_whose_version_is_not_a_whole_number_is_damaged_and_a_newer_one_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "normal_rates.json"
    entry = {**NormalRate({INTER_TOKEN_LATENCY: {1: 77.0}}).to_json(), "saved_at": 1.0}
    for damaged in ("1", 1.5, True, None, 0, -1):
        path.write_text(json.dumps({"version": damaged, "rates": {"k": entry}}))
        assert NormalRateStore(path).load("k") is None, damaged
    newer = json.dumps({"version": 2, "rates": {"k": entry}})
    path.write_text(newer)
    store = NormalRateStore(path)
    assert store.load("k") is None
    store.save("other", NormalRate({INTER_TOKEN_LATENCY: {1: 70.0}}))
    assert path.read_text() == newer  # a newer vramtop's rates are not overwritten
    path.write_text(json.dumps({"version": 1, "rates": {"k": entry}}))
    assert NormalRateStore(path).load("k") is not None
