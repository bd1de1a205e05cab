"""Who asked, as the lasting timeline says: a headless command's actions are a command's,
not a key's (only the console's backend asks as a key)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_once import run_vramtop


@pytest.mark.slow
def test_a_recording_that_starts_the_demo_server_writes_its_start_as_a_command(
    tmp_path: Path,
) -> None:
    try:
        recorded = run_vramtop(
            tmp_path, "record", "--demo", "--duration", "1", str(tmp_path / "r.jsonl")
        )
        assert recorded.returncode == 0, recorded.stderr
        events = json.loads(run_vramtop(tmp_path, "events", "--demo", "--json").stdout)["events"]
        starts = [e for e in events if e["event"] == "start"]
        assert starts and all(e["detail"]["asked_by"] == "command" for e in starts), events
    finally:
        run_vramtop(tmp_path, "stop", "--demo", "--all")
