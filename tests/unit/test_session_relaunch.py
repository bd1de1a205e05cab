"""A relaunch in the live session is recorded once it has answered, with its result: only one
whose new server serves closes what the old server had open."""

from __future__ import annotations

from tests.support.synthetic import Card, build, busy, field_report, idle
from vramtop.core.findings import SERVER_CRASHED, VRAM_CONTENTION
from vramtop.core.model import Sample, ServerState
from vramtop.session.live import LiveSession


def contended() -> tuple[LiveSession, Card, float]:
    """A session of the field report up to its open vram_contention finding."""
    session, card = LiveSession(), Card()
    for record in build(card, field_report(call_at=60, restart_at=400)):
        if not isinstance(record, Sample):
            continue
        session.observe(record)
        if any(f.kind == VRAM_CONTENTION for f in session.findings()):
            return session, card, record.t
    raise AssertionError("the field report opened no vram_contention finding")


def open_kinds(session: LiveSession) -> set[str]:
    return {f.kind for f in session.findings()}


def test_only_a_relaunch_that_served_closes_the_contention() -> None:
    session, _, t = contended()
    for result in ("rolled_back", "failed"):
        session.action(t, "relaunch", {"gpu_memory_utilization": 0.99, "result": result})
        assert VRAM_CONTENTION in open_kinds(session), result
    events = [e for e in session.events() if e.name in ("relaunch", "finding")]
    assert [(e.name, e.detail.get("result")) for e in events[-2:]] == [
        ("relaunch", "rolled_back"),
        ("relaunch", "failed"),
    ]
    assert not any(e.detail.get("change") == "closed" for e in events)

    session.action(t + 1, "relaunch", {"gpu_memory_utilization": 0.85, "result": "ok"})
    assert VRAM_CONTENTION not in open_kinds(session)
    closed = [e for e in session.events() if e.name == "finding"][-1]
    assert closed.detail["kind"] == VRAM_CONTENTION and closed.detail["change"] == "closed"


def test_a_crash_after_a_relaunch_that_served_is_a_crash() -> None:
    """The relaunch is recorded after its server's ready (a tick may have seen it first):
    the exit it planned is behind it, and the next one nobody asked for is a crash."""
    session, card = LiveSession(), Card()
    session.observe(card.sample(busy(1.0)))
    session.observe(card.sample(busy(2.0)))
    session.action(2.5, "relaunch", {"gpu_memory_utilization": 0.85, "result": "ok"})
    session.observe(card.sample(busy(3.0)))
    session.observe(card.sample(idle(4.0, state=ServerState.CRASHED, healthy=None)))
    assert SERVER_CRASHED in open_kinds(session)
