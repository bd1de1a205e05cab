"""On WSL2 with the Windows side watched, the collapse finding cites the spill as observed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.support.synthetic import Card, build, field_report
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.findings import VRAM_CONTENTION
from vramtop.core.model import GIB, Sample
from vramtop.core.windows.reading import WindowsGpuReading, WindowsProcessGpu
from vramtop.session.session_reader import read_session
from vramtop.session.writer import SessionWriter

CALL_AT = 120.0


def windows_side(t: float) -> WindowsGpuReading:
    """The WSL VM's shared usage climbs by ~2.5 GiB once the call squeezes the card."""
    spilled = 0 if t < CALL_AT + 5 else int(min(2.5, (t - CALL_AT - 5) / 8) * GIB)
    vm = WindowsProcessGpu(9000, "vmmemWSL", int(29.5 * GIB) - spilled, int(0.12 * GIB) + spilled)
    teams = WindowsProcessGpu(10456, "ms-teams.exe", int(2.7 * GIB) if t >= CALL_AT else 0, 0)
    return WindowsGpuReading(processes=(vm, teams), wsl_vm=vm, desktop=(teams,), t=t)


def field_report_samples(with_windows: bool) -> list[Sample]:
    samples = [
        s for s in build(Card(wsl=True), field_report(call_at=CALL_AT)) if isinstance(s, Sample)
    ]
    return [replace(s, windows=windows_side(s.t)) if with_windows else s for s in samples]


def contention(samples: list[Sample]):  # type: ignore[no-untyped-def]
    diagnoser = Diagnoser()
    for s in samples:
        diagnoser.feed_sample(s)
    return next(f for f in diagnoser.all_findings() if f.kind == VRAM_CONTENTION)


def test_without_the_windows_side_the_spill_stays_a_hypothesis() -> None:
    finding = contention(field_report_samples(with_windows=False))
    assert finding.ladder.hypothesis, "the spill is unmeasured: it must stay a hypothesis"
    assert not any("shared" in line for line in finding.ladder.observed)


def test_a_rising_shared_usage_is_cited_as_observed() -> None:
    finding = contention(field_report_samples(with_windows=True))
    assert any("shared" in line for line in finding.ladder.observed)
    assert finding.evidence["wsl_vm_shared_rise_bytes"] > 256 * 1024**2


def test_the_windows_field_survives_a_recording(tmp_path: Path) -> None:
    path = tmp_path / "wsl.jsonl"
    with SessionWriter(path, {"started_at": "x", "host": {"wsl": True}}) as writer:
        for s in field_report_samples(with_windows=True):
            writer.sample(s)
    _, records = read_session(path)
    replayed = [r for r in records if isinstance(r, Sample)]
    assert replayed[-1].windows is not None
    assert replayed[-1].windows.wsl_vm is not None
    finding = contention(replayed)
    assert any("shared" in line for line in finding.ladder.observed)
