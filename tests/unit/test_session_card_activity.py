"""The card's own figures (PCIe traffic, utilisation, WSL2's residency failures) recorded as
optional fields, read back, and in `--once --json`; recordings without them read as before."""

from __future__ import annotations

import json
from pathlib import Path

from vramtop.core.model import GIB, GpuDevice, GpuReading, Sample
from vramtop.core.snapshot import snapshot
from vramtop.session.session_reader import SessionReader
from vramtop.session.writer import SessionWriter, make_header, sample_line

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sessions"


def _device(**card: object) -> GpuDevice:
    return GpuDevice(0, "NVIDIA GeForce RTX 5090", 32 * GIB, 31 * GIB, 1 * GIB, **card)  # type: ignore[arg-type]


BUSY = _device(
    pcie_rx_bytes_per_s=12_100_000_000,
    pcie_tx_bytes_per_s=310_000_000,
    gpu_util=0.97,
    memory_util=0.41,
)


def _samples(path: Path, *samples: Sample) -> list[Sample]:
    header = make_header(started_at="2026-12-02T00:00:00Z", gpus=[BUSY], wsl=True)
    with SessionWriter(path, header) as writer:
        for sample in samples:
            writer.sample(sample)
    return [r for r in SessionReader(path) if isinstance(r, Sample)]


def test_the_cards_figures_round_trip_through_a_recording(tmp_path: Path) -> None:
    written = Sample(t=1.0, gpu=GpuReading(devices=(BUSY,), residency_failures=3))
    (read,) = _samples(tmp_path / "s.jsonl", written)
    device = read.gpu.devices[0]
    assert device.pcie_rx_bytes_per_s == 12_100_000_000
    assert device.pcie_tx_bytes_per_s == 310_000_000
    assert (device.gpu_util, device.memory_util) == (0.97, 0.41)
    assert read.gpu.residency_failures == 3


def test_unknown_figures_are_not_written_and_read_as_unknown(tmp_path: Path) -> None:
    line = sample_line(Sample(t=1.0, gpu=GpuReading(devices=(_device(),))))
    assert "residency_failures" not in line
    assert not {"pcie_rx_bytes_per_s", "gpu_util", "memory_util"} & set(line["gpus"][0])
    # A zero is known (nothing crossed the bus; no failure logged) and kept.
    zero = Sample(t=2.0, gpu=GpuReading(devices=(_device(gpu_util=0.0),), residency_failures=0))
    (unknown, known) = _samples(
        tmp_path / "s.jsonl", Sample(t=1.0, gpu=GpuReading((_device(),))), zero
    )
    assert unknown.gpu.residency_failures is None and unknown.gpu.devices[0].gpu_util is None
    assert known.gpu.residency_failures == 0 and known.gpu.devices[0].gpu_util == 0.0


def test_out_of_range_values_in_a_file_are_unknown(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _samples(path)
    with path.open("a") as f:
        gpu = {
            "index": 0,
            "used_bytes": 1,
            "total_bytes": 2,
            "gpu_util": 97,
            "memory_util": -1,
            "pcie_rx_bytes_per_s": -5,
            "pcie_tx_bytes_per_s": "fast",
        }
        f.write(json.dumps({"t": 1.0, "gpus": [gpu], "residency_failures": -1}) + "\n")
    (read,) = [r for r in SessionReader(path) if isinstance(r, Sample)]
    device = read.gpu.devices[0]
    assert device.gpu_util is None and device.memory_util is None  # 97 is a percent, not 0..1
    assert device.pcie_rx_bytes_per_s is None and device.pcie_tx_bytes_per_s is None
    assert read.gpu.residency_failures is None


def test_a_recording_made_before_these_fields_reads_unchanged() -> None:
    samples = [
        r for r in SessionReader(FIXTURES / "field_report_wsl.jsonl") if isinstance(r, Sample)
    ]
    assert samples
    for sample in samples:
        assert sample.gpu.residency_failures is None
        for device in sample.gpu.devices:
            assert device.pcie_rx_bytes_per_s is None and device.gpu_util is None


def test_once_json_adds_the_figures_and_keeps_unknowns_as_null() -> None:
    known = snapshot(
        Sample(t=1.0, gpu=GpuReading((BUSY,), residency_failures=2)), wsl=True, demo=False
    )
    assert known["residency_failures"] == 2
    assert known["gpus"][0]["pcie_rx_bytes_per_s"] == 12_100_000_000
    assert known["gpus"][0]["gpu_util"] == 0.97 and known["gpus"][0]["memory_util"] == 0.41
    unknown = snapshot(Sample(t=1.0, gpu=GpuReading((_device(),))), wsl=False, demo=False)
    assert unknown["residency_failures"] is None
    gpu = unknown["gpus"][0]
    assert [
        gpu[k] for k in ("pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s", "gpu_util", "memory_util")
    ] == [None] * 4
    json.dumps(known)
