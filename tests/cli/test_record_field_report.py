"""The field report, played by the simulated card, recorded as `vramtop record` records (its
own loop and file), diagnosed from the file by `vramtop diagnose`: the collapse is named
`vram_contention` and the remedy fits the 32 GB card. The card, the simulated vLLM and the
recorder run in the test's process on a clock the recorder's waits move
(tests/support/sim_card.py): the day's minutes take seconds; times are simulated ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.sim_card import CardSupervisor, SimCard
from vramtop.commands.common import open_session_file
from vramtop.commands.record import record_loop

SPEED = 5.0  # the scheduler steps as the simulator's processes do at 5 times real time
CALL_AT = 60.0  # the field report's call begins (simulated seconds), and lasts 3 minutes


def vramtop(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vramtop", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, VRAMTOP_HOME=str(home)),
    )


@pytest.mark.slow
@pytest.mark.parametrize("wsl", [False, True], ids=["linux", "wsl2"])
def test_recorded_field_report_diagnoses_as_vram_contention(
    tmp_path: Path, wsl: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("VRAMTOP_HOME", str(home))
    card = SimCard("field_report", speed=SPEED)
    supervisor = CardSupervisor(card, "demo", card.machine.card.budget)
    session = tmp_path / "field-report.jsonl"
    # As `vramtop --interval 0.25 record FILE --demo --duration 28` at VRAMTOP_SIM_SPEED=5.
    with supervisor.backend(wsl=wsl) as backend:
        first = backend.tick(log_limit=0).sample
        with open_session_file(session, backend, first) as writer:
            writer.sample(first)
            record_loop(
                backend,
                writer,
                session=backend.session,
                interval_s=0.25 * SPEED,
                duration_s=28 * SPEED,
                clock=card.clock.now,
                sleep=supervisor.run,
                log_lines=backend.log_lines,
            )

    header = json.loads(session.read_text().splitlines()[0])
    assert header["format"] == "vramtop-session" and header["host"]["wsl"] is wsl

    diagnosis = vramtop(home, "diagnose", str(session), "--json")
    assert diagnosis.returncode == 0, diagnosis.stderr
    findings = json.loads(diagnosis.stdout)["findings"]
    assert [f["kind"] for f in findings] == ["vram_contention"]
    contention = findings[0]
    # named within 50 simulated seconds of the call's start (10 s at SPEED)
    assert CALL_AT <= contention["first_seen_t"] <= CALL_AT + 10 * SPEED
    assert contention["evidence"]["kv_cache_usage"] < 0.2
    remedy = contention["remedy"]
    assert remedy["action"] == "relaunch"
    assert remedy["gpu_memory_utilization"] <= 0.88
    # The agent's long answer taught a normal rate before the call began, from the per-token
    # latency vLLM's /metrics exposes.
    from vramtop.core.diagnosis.diagnoser import Diagnoser
    from vramtop.core.model import Sample
    from vramtop.session.session_reader import SessionReader

    diagnoser = Diagnoser()
    learned_at = None
    for record in SessionReader(session):
        if isinstance(record, Sample):
            diagnoser.feed_sample(record)
            if learned_at is None and diagnoser.normal_rate() is not None:
                learned_at = record.t
    assert learned_at is not None and learned_at < CALL_AT
    normal = diagnoser.normal_rate()
    assert normal is not None and normal.measure == "inter_token_latency"
    print(f"\nfirst_seen_t {contention['first_seen_t']}, learned_at {learned_at}, remedy {remedy}")
