"""The collapse's ladder cites what the card itself said: PCIe RX while decoding against the
normal period's, and WSL2's residency failures. Additive: without those figures (every
recording made before) the finding is the same as before."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.support.synthetic import Card, build, field_report
from vramtop.commands import diagnose
from vramtop.core.diagnosis.card_evidence import CardWatch
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.findings import VRAM_CONTENTION, Finding
from vramtop.core.model import GIB, GpuDevice, GpuReading, Sample, ServerMetrics, ServerReading
from vramtop.session.writer import SessionWriter, make_header

CALL_AT, RESTART_AT = 60.0, 200.0
FIXTURES = Path(__file__).parent.parent / "fixtures" / "sessions"
RUNG = "PCIe RX 12 GB/s while decoding; 0.3 before the call"


def with_card(sample: Sample, *, residency: bool) -> Sample:
    """The field report's samples as a card that gives its figures shows them: ~12 GB/s RX
    from the call on (the spill is sticky until the restart), 0.3 before and after."""
    spilled = CALL_AT <= sample.t < RESTART_AT
    devices = tuple(
        replace(d, pcie_rx_bytes_per_s=int(12.1e9 if spilled else 0.3e9), gpu_util=0.97)
        for d in sample.gpu.devices
    )
    failures = (1 if CALL_AT <= sample.t < CALL_AT + 180 else 0) if residency else None
    return replace(sample, gpu=replace(sample.gpu, devices=devices, residency_failures=failures))


def records(card: bool, residency: bool = False) -> list[Sample | tuple[Any, ...]]:
    out: list[Sample | tuple[Any, ...]] = []
    for r in build(Card(wsl=True), field_report(call_at=CALL_AT, restart_at=RESTART_AT)):
        out.append(with_card(r, residency=residency) if card and isinstance(r, Sample) else r)
    return out


def collapse(items: list[Sample | tuple[Any, ...]]) -> Finding:
    d = Diagnoser()
    for r in items:
        d.feed_event(*r) if isinstance(r, tuple) else d.feed_sample(r)
    (finding,) = [f for f in d.all_findings() if f.kind == VRAM_CONTENTION]
    return finding


def test_the_ladder_cites_pcie_rx_while_decoding_against_before_the_call() -> None:
    finding = collapse(records(card=True))
    assert RUNG in finding.ladder.observed
    assert finding.evidence["pcie_rx_bytes_per_s"] == 12_100_000_000
    assert finding.evidence["normal_pcie_rx_bytes_per_s"] == 300_000_000
    # Measured now, so decoding from host memory is inferred, no longer a hypothesis.
    assert any("host memory" in s and "PCIe" in s for s in finding.ladder.inferred)
    assert not any("residency" in s for s in finding.ladder.hypothesis)


def test_residency_failures_join_the_ladder_on_wsl2() -> None:
    finding = collapse(records(card=True, residency=True))
    cited = [s for s in finding.ladder.observed if "dxgkio_make_resident" in s]
    assert len(cited) == 1 and "in the last 60 s" in cited[0]
    failures = finding.evidence["residency_failures"]
    assert isinstance(failures, int) and 0 < failures <= 60


def test_the_rung_is_additive_everything_else_is_as_before() -> None:
    plain = collapse(records(card=False))
    cited = collapse(records(card=True, residency=True))
    assert "pcie_rx_bytes_per_s" not in plain.evidence
    added = {"pcie_rx_bytes_per_s", "normal_pcie_rx_bytes_per_s", "residency_failures"}
    assert {k: v for k, v in cited.evidence.items() if k not in added} == dict(plain.evidence)
    assert set(plain.ladder.observed) <= set(cited.ladder.observed)
    as_json, before = cited.to_json(), plain.to_json()
    for key in ("kind", "severity", "first_seen_t", "summary", "remedy", "ruled_out"):
        assert as_json[key] == before[key]


def test_a_recording_made_before_the_figures_diagnoses_as_before() -> None:
    for finding in diagnose.diagnose_file(FIXTURES / "field_report_wsl.jsonl"):
        assert "pcie_rx_bytes_per_s" not in finding.evidence
        assert not any("PCIe RX" in s for s in finding.ladder.observed)


def test_a_recording_with_them_diagnoses_as_the_live_console_did(tmp_path: Path) -> None:
    items = records(card=True, residency=True)
    first = next(r for r in items if isinstance(r, Sample))
    path = tmp_path / "s.jsonl"
    header = make_header(
        started_at="2026-12-02T00:00:00Z", gpus=first.gpu.devices, info=first.info, wsl=True
    )
    with SessionWriter(path, header) as writer:
        for r in items:
            writer.sample(r) if isinstance(r, Sample) else writer.event(*r)
    (replayed,) = [f for f in diagnose.diagnose_file(path) if f.kind == VRAM_CONTENTION]
    assert replayed.to_json() == collapse(items).to_json()
    assert RUNG in replayed.ladder.observed


def _sample(t: float, rx: int | None, failures: int | None = None, running: int = 1) -> Sample:
    device = GpuDevice(0, "GPU", 32 * GIB, 31 * GIB, GIB, pcie_rx_bytes_per_s=rx)
    server = ServerReading(
        "http://x", reachable=True, metrics=ServerMetrics(requests_running=running)
    )
    return Sample(t=t, gpu=GpuReading((device,), residency_failures=failures), server=server)


def test_the_watch_keeps_the_normal_period_and_the_last_minutes_failures() -> None:
    watch = CardWatch()
    assert watch.evidence() is None
    for t in range(10):
        watch.track(_sample(t, 300_000_000), normal=True)
    # Between two turns: idle traffic, neither the normal period's nor the collapse's.
    watch.track(_sample(10, 20_000_000, running=0), normal=True)
    for t in range(11, 17):
        watch.track(_sample(t, 12_000_000_000, failures=2), normal=False)
    ev = watch.evidence()
    assert ev is not None and ev.reads_host_memory
    assert (ev.pcie_rx_bytes_per_s, ev.normal_pcie_rx_bytes_per_s) == (12_000_000_000, 300_000_000)
    assert ev.residency_failures == 12
    watch.track(_sample(100, 300_000_000, failures=0), normal=True)
    ev = watch.evidence()
    assert ev is not None and ev.residency_failures == 0  # a minute later: none in the window
    watch.new_epoch()  # a restart: the normal period stays, the collapse's figures go
    watch.track(_sample(101, None), normal=False)
    assert watch.evidence() is None
