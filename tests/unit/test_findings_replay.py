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

EXPECTED = json.loads((HERE / "findings.json").read_text())


@pytest.mark.parametrize("path", recordings(), ids=lambda p: p.name)
def test_a_recording_replays_to_the_findings_it_did(path: Path) -> None:
    found = findings_json(path)
    assert found == EXPECTED[path.name]
    # Key order, nested too, is part of what `diagnose --json` prints.
    assert json.dumps(found) == json.dumps(EXPECTED[path.name])


def test_every_recording_is_kept_and_almost_every_kind_is_covered() -> None:
    assert sorted(p.name for p in recordings()) == sorted(EXPECTED)
    kinds = {f["kind"] for found in EXPECTED.values() for f in found}
    # launch_failed needs a supervisor that could not spawn vLLM: tests/supervisor has it.
    assert kinds == set(KINDS) - {"launch_failed"}
