"""server_not_answering: a server whose process holds its port but answers nothing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.support.synthetic import Card, build, busy
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.diagnosis.server_down import NOT_ANSWERING_S
from vramtop.core.findings import KINDS, SERVER_NOT_ANSWERING
from vramtop.core.model import Sample, ServerState


def _samples(quiet: list[float | None], state: ServerState = ServerState.RUNNING) -> list[Sample]:
    base = [r for r in build(Card(), [busy(float(t)) for t in range(len(quiet))])]
    out = []
    for sample, seconds in zip([s for s in base if isinstance(s, Sample)], quiet, strict=True):
        assert sample.server is not None and sample.info is not None
        server = sample.server
        if seconds is not None:
            server = replace(server, reachable=False, healthy=None, metrics=None)
        server = replace(server, not_answering_s=seconds)
        out.append(replace(sample, server=server, info=replace(sample.info, state=state)))
    return out


def _run(samples: list[Sample]) -> Diagnoser:
    d = Diagnoser()
    for sample in samples:
        d.feed_sample(sample)
    return d


def test_silent_past_the_limit_opens_offering_a_restart_and_an_answer_closes_it() -> None:
    quiet: list[float | None] = [None] * 5 + [2.0, 6.0, NOT_ANSWERING_S + 1, 15.0] + [None] * 3
    d = _run(_samples(quiet))
    (finding,) = [f for f in d.all_findings() if f.kind == SERVER_NOT_ANSWERING]
    assert finding.remedy.action == "restart"
    assert finding.first_seen_t == 7.0 and finding.closed_t == 9.0
    assert finding.evidence["not_answering_s"] == 15.0


def test_a_short_stall_or_a_stopped_server_is_not_one() -> None:
    assert _run(_samples([None, 2.0, 6.0, 9.0, None])).all_findings() == []
    stopped = _samples([None, 12.0, 15.0], state=ServerState.STOPPED)
    assert not [f for f in _run(stopped).all_findings() if f.kind == SERVER_NOT_ANSWERING]


def test_the_kind_is_part_of_the_vocabulary() -> None:
    assert SERVER_NOT_ANSWERING in KINDS


def test_a_recording_keeps_the_silence_and_diagnose_finds_it(tmp_path: Path) -> None:
    from vramtop.commands.diagnose import diagnose_file
    from vramtop.session.writer import SessionWriter

    path = tmp_path / "hung.jsonl"
    quiet: list[float | None] = [None] * 5 + [4.0, 8.0, 12.0, 16.0, 20.0]
    with SessionWriter(path, {"started_at": "2026-01-01T00:00:00Z"}) as writer:
        for sample in _samples(quiet):
            writer.sample(sample)
    kinds = [f.kind for f in diagnose_file(path)]
    assert kinds == [SERVER_NOT_ANSWERING]
