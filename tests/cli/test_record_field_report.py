"""The field report, played by the simulator, recorded by `vramtop record`, diagnosed from the
file: the collapse is named `vram_contention` and the remedy fits the 32 GB card."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def vramtop(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        VRAMTOP_HOME=str(home),
        VRAMTOP_SIM_SCENARIO="field_report",  # a call at 60 s (simulated) that lasts 3 minutes
        VRAMTOP_SIM_SPEED="5",
        VRAMTOP_SIM_STARTUP_S="0.3",
    )
    return subprocess.run(
        [sys.executable, "-m", "vramtop", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.mark.slow
@pytest.mark.parametrize("wsl", [False, True], ids=["linux", "wsl2"])
def test_recorded_field_report_diagnoses_as_vram_contention(tmp_path: Path, wsl: bool) -> None:
    session = tmp_path / "field-report.jsonl"
    record = ["--interval", "0.25", "record", str(session), "--demo", "--duration", "28"]
    if wsl:
        record.append("--wsl")
    result = vramtop(tmp_path / "home", *record)
    assert result.returncode == 0, result.stderr

    header = json.loads(session.read_text().splitlines()[0])
    assert header["format"] == "vramtop-session" and header["host"]["wsl"] is wsl

    diagnosis = vramtop(tmp_path / "home", "diagnose", str(session), "--json")
    assert diagnosis.returncode == 0, diagnosis.stderr
    findings = json.loads(diagnosis.stdout)["findings"]
    assert [f["kind"] for f in findings] == ["vram_contention"]
    contention = findings[0]
    # the call starts at 60 s simulated = 12 s here; named within 10 s of it
    assert 12 <= contention["first_seen_t"] <= 22
    assert contention["evidence"]["kv_cache_usage"] < 0.2
    remedy = contention["remedy"]
    assert remedy["action"] == "relaunch"
    assert remedy["gpu_memory_utilization"] <= 0.88
    # The demo's agent (long contexts re-read every turn, one or two streams) taught a normal
    # rate before the call began, from the per-token latency vLLM's /metrics exposes.
    from vramtop.core.diagnosis.diagnoser import Diagnoser
    from vramtop.core.model import Sample
    from vramtop.session.reader import SessionReader

    diagnoser = Diagnoser()
    learned_at = None
    for record in SessionReader(session):
        if isinstance(record, Sample):
            diagnoser.feed_sample(record)
            if learned_at is None and diagnoser.normal_rate() is not None:
                learned_at = record.t
    assert learned_at is not None and learned_at < 12
    normal = diagnoser.normal_rate()
    assert normal is not None and normal.measure == "inter_token_latency"
