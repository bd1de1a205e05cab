"""The collapse finding on the two other machines: a DGX Spark (unified memory: contention is
system memory pressure) and a Radeon R9700 (a GTT spill is the direct evidence)."""

from __future__ import annotations

from dataclasses import replace

from tests.support.synthetic import Card, build, field_report
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.findings import VRAM_CONTENTION, Finding
from vramtop.core.model import GIB, MIB, MemoryKind, Sample

CALL_AT = 120.0
SPARK_POOL = 125487628 * 1024


def samples(card: Card) -> list[Sample]:
    return [s for s in build(card, field_report(call_at=CALL_AT)) if isinstance(s, Sample)]


def contention(items: list[Sample]) -> Finding:
    diagnoser = Diagnoser()
    for s in items:
        diagnoser.feed_sample(s)
    return next(f for f in diagnoser.all_findings() if f.kind == VRAM_CONTENTION)


def as_spark(s: Sample) -> Sample:
    device = replace(s.gpu.devices[0], memory_kind=MemoryKind.UNIFIED, name="NVIDIA GB10")
    assert s.split is not None
    split = replace(s.split, memory_kind=MemoryKind.UNIFIED)
    return replace(s, gpu=replace(s.gpu, devices=(device,)), split=split)


def test_on_unified_memory_contention_is_system_memory_pressure() -> None:
    # The Spark's pool with a budget that leaves the system ~2 GiB: a workload growing in
    # system memory squeezes vLLM.
    card = Card(total_bytes=SPARK_POOL, util=0.97, wsl=False)
    finding = contention([as_spark(s) for s in samples(card)])
    ev = finding.evidence
    assert ev["memory_kind"] == "unified"
    assert ev["memory_available_bytes"] is not None and ev["memory_available_bytes"] < 2 * GIB
    assert ev["budget_bytes"] is not None and ev["total_bytes"] == SPARK_POOL
    assert any("system memory, shared with the GPU" in line for line in finding.ladder.observed)
    assert finding.ladder.inferred == (
        "the desktop and vLLM are competing for the memory they share",
    )
    assert not any("VRAM" in line for line in finding.ladder.hypothesis)
    assert "system memory" in finding.summary and "the card" not in finding.summary


def test_on_a_discrete_card_the_evidence_names_dedicated_memory() -> None:
    finding = contention(samples(Card(wsl=False)))
    assert finding.evidence["memory_kind"] == "dedicated"
    assert finding.evidence["memory_available_bytes"] is None
    assert any("the card is" in line for line in finding.ladder.observed)


def with_gtt(s: Sample) -> Sample:
    """vLLM's buffers in GTT: 120 MiB at rest, then what the call pushes out of VRAM."""
    spilled = 0 if s.t < CALL_AT + 5 else int(min(2.5, (s.t - CALL_AT - 5) / 8) * GIB)
    assert s.split is not None
    return replace(s, split=replace(s.split, server_gtt_bytes=120 * MIB + spilled))


def test_on_the_r9700_a_gtt_spill_is_the_direct_evidence() -> None:
    without = contention(samples(Card(wsl=False)))
    assert "spill_source" not in without.evidence
    assert any("residency" in h for h in without.ladder.hypothesis)

    finding = contention([with_gtt(s) for s in samples(Card(wsl=False))])
    ev = finding.evidence
    assert ev["spill_source"] == "gtt" and ev["spill_level"] == "observed"
    assert ev["server_gtt_baseline_bytes"] == 120 * MIB
    assert ev["server_gtt_rise_bytes"] >= 2 * GIB
    assert any(line.startswith("amdgpu: vLLM's buffers in GTT") for line in finding.ladder.observed)
    # Measured now, so no longer a hypothesis; what it does to decoding is inferred.
    assert not any("residency" in h for h in finding.ladder.hypothesis)
    assert any("PCIe" in line for line in finding.ladder.inferred)
    assert "wsl_vm_shared_bytes" not in ev
