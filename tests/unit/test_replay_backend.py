"""A recording played back as a console backend: samples paced by speed, findings re-derived."""

from __future__ import annotations

from pathlib import Path

from tests.support.synthetic import Card, build, field_report
from vramtop.core.findings import VRAM_CONTENTION
from vramtop.core.model import Sample
from vramtop.core.remedy import FlagChange, RelaunchOrder
from vramtop.machines.replay_backend import ReplayBackend
from vramtop.session.writer import SessionWriter


def record_field_report(path: Path) -> float:
    last = 0.0
    with SessionWriter(path, {"started_at": "2026-11-29T14:02:11Z", "host": {"wsl": True}}) as w:
        for item in build(Card(wsl=True), field_report(call_at=120, restart_at=400)):
            if isinstance(item, Sample):
                w.sample(item)
                last = item.t
            else:
                t, name, detail = item
                w.event(t, name, detail)
    return last


def test_replay_paces_by_speed_and_reraises_the_collapse(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    last_t = record_field_report(path)
    now = [0.0]
    backend = ReplayBackend(path, speed=10.0, clock=lambda: now[0])
    assert backend.wsl is True

    first = backend.tick().sample
    now[0] = 10.0  # 10 s of playback at ×10 = 100 recorded seconds
    before_call = backend.tick().sample
    assert 90 <= before_call.t - first.t <= 101
    assert not backend.findings()

    now[0] = 14.0  # t ≈ 140: twenty seconds into the call
    backend.tick()
    assert [f.kind for f in backend.findings()] == [VRAM_CONTENTION]

    now[0] = 10_000.0
    end = backend.tick().sample
    assert end.t == last_t and backend.finished
    assert not backend.findings(), "the restart closed the collapse"
    assert any(e.name == "restart" for e in backend.events())


def test_replay_refuses_actions(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    record_field_report(path)
    backend = ReplayBackend(path)
    assert not backend.restart().ok
    assert "recording" in backend.relaunch(RelaunchOrder(FlagChange(0.85))).message
