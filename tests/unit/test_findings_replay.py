"""Recordings made before a change replay to the same findings, byte for byte in JSON.

`fixtures/findings/findings.json` holds what every recording (the session fixtures and the
synthetic ones beside it) replayed to when it was made, as `diagnose --json` prints it; a
change to how findings are built must leave it as it is. Each kind of finding is covered.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.fixtures.findings.make_recordings import HERE, findings_json, recordings
from vramtop.core.findings import KINDS
from vramtop.core.model import Sample
from vramtop.session.live import LiveSession
from vramtop.session.session_reader import SessionReader
from vramtop.session.writer import SessionWriter

EXPECTED = json.loads((HERE / "findings.json").read_text())
# The `finding` event lines a live session recorded over the same samples and actions, as the
# session writer wrote them before findings were typed.
LIVE = json.loads((HERE / "live_findings.json").read_text())


@pytest.mark.parametrize("path", recordings(), ids=lambda p: p.name)
def test_a_recording_replays_to_the_findings_it_did(path: Path) -> None:
    found = findings_json(path)
    assert found == EXPECTED[path.name]
    # Key order, nested too, is part of what `diagnose --json` prints.
    assert json.dumps(found) == json.dumps(EXPECTED[path.name])


@pytest.mark.parametrize("path", recordings(), ids=lambda p: p.name)
def test_a_live_session_records_the_same_finding_lines(path: Path, tmp_path: Path) -> None:
    out = tmp_path / path.name
    with SessionWriter(out, {"started_at": "2026-12-01T00:00:00Z"}) as writer:
        live = LiveSession(writer=writer)
        for record in SessionReader(path).records():
            if isinstance(record, Sample):
                live.observe(record)
            elif record.name in ("restart", "relaunch", "stop"):
                live.action(record.t, record.name, dict(record.detail))
    lines = [line for line in out.read_text().splitlines() if '"event":"finding"' in line]
    assert lines == LIVE[path.name]


def test_every_recording_is_kept_and_almost_every_kind_is_covered() -> None:
    assert sorted(p.name for p in recordings()) == sorted(EXPECTED) == sorted(LIVE)
    assert sum(len(lines) for lines in LIVE.values()) == 21
    kinds = {f["kind"] for found in EXPECTED.values() for f in found}
    # launch_failed needs a supervisor that could not spawn vLLM: tests/supervisor has it.
    assert kinds == set(KINDS) - {"launch_failed"}
