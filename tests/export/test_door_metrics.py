"""The front door's figures in the exposition: only where a door answers, the existing series
unchanged beside them; through the real exporter over the real door process."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.frontdoor.upstreams import upstream
from tests.support import http
from tests.support.door import real_door
from vramtop.core.exposition import ExportState, series_for
from vramtop.core.model import GIB, DoorReading, GpuDevice, GpuReading, Sample
from vramtop.export.exporter import Exporter
from vramtop.machines.machine_backend import MachineBackend
from vramtop.machines.sampler import Sampler
from vramtop.sources.door_reading import DoorReader

CARD = GpuReading(devices=(GpuDevice(0, "card", 32 * GIB, 30 * GIB, 2 * GIB),), source="sim")
DOOR = DoorReading(
    address="127.0.0.1:8000",
    in_flight=2,
    held=3,
    served=41,
    failed=1,
    longest_hold_s=8.5,
    ttft_p50_s=0.21,
    ttft_p95_s=0.8,
    e2e_p50_s=3.1,
    e2e_p95_s=None,  # not measured: its series is absent, never a zero
    decode_tps_p50=52.4,
)

DOOR0 = DoorReading(address="127.0.0.1:8000", in_flight=0)


def door_lines(sample: Sample) -> list[tuple[str, tuple[tuple[str, str], ...], float]]:
    series = series_for(ExportState(version="t", sample=sample, sampled_at=1.0))
    return [(s.name, s.labels, s.value) for s in series if s.name.startswith("vramtop_door_")]


def test_each_door_figure_is_one_series() -> None:
    assert door_lines(Sample(t=1.0, gpu=CARD, door=DOOR)) == [
        ("vramtop_door_in_flight", (), 2.0),
        ("vramtop_door_held", (), 3.0),
        ("vramtop_door_requests_total", (("result", "served"),), 41.0),
        ("vramtop_door_requests_total", (("result", "failed"),), 1.0),
        ("vramtop_door_ttft_seconds", (("quantile", "0.5"),), 0.21),
        ("vramtop_door_ttft_seconds", (("quantile", "0.95"),), 0.8),
        ("vramtop_door_e2e_seconds", (("quantile", "0.5"),), 3.1),
        ("vramtop_door_decode_tokens_per_second", (("quantile", "0.5"),), 52.4),
        ("vramtop_door_longest_hold_seconds", (), 8.5),
    ]


def test_a_door_that_measured_no_decode_speed_exports_none() -> None:
    # An answer that came in one chunk has no speed: the series is absent, never a zero.
    names = [name for name, _labels, _value in door_lines(Sample(t=1.0, gpu=CARD, door=DOOR0))]
    assert "vramtop_door_decode_tokens_per_second" not in names
    assert "vramtop_door_in_flight" in names


def test_no_door_no_door_series_and_the_rest_the_same() -> None:
    without = Sample(t=1.0, gpu=CARD)
    assert door_lines(without) == []
    state = ExportState(version="t", sample=without, sampled_at=1.0)
    with_door = ExportState(version="t", sample=Sample(t=1.0, gpu=CARD, door=DOOR), sampled_at=1.0)
    others = [s for s in series_for(with_door) if not s.name.startswith("vramtop_door_")]
    assert others == series_for(state)


def families(text: str) -> dict[str, tuple[str, dict[tuple[tuple[str, str], ...], float]]]:
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("vramtop_door_"):
            values = {tuple(sorted(s.labels.items())): s.value for s in family.samples}
            out[family.name] = (family.type, values)
    return out


def test_the_exporter_serves_what_the_real_door_sees(tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    with upstream() as up, real_door(up, tmp_path) as (_proc, url):
        for _ in range(2):
            answer = http.post(url + "/v1/completions", json={"prompt": "hi"}, timeout=10)
            assert answer.status_code == 200
        door = DoorReader(url, url.removeprefix("http://"))
        backend = MachineBackend(
            sampler=Sampler(probe=_Card(), url=None, door=door), supervisor=None
        )
        exporter = Exporter(backend, clock=lambda: 1.0)
        exporter.sample_once()
        text = generate_latest(exporter.registry()).decode()
        backend.close(stop_server=False)
    found = families(text)
    # prometheus_client's parser names a counter's family without `_total`.
    assert found["vramtop_door_requests"] == (
        "counter",
        {(("result", "served"),): 2.0, (("result", "failed"),): 0.0},
    )
    assert found["vramtop_door_in_flight"] == ("gauge", {(): 0.0})
    assert found["vramtop_door_held"] == ("gauge", {(): 0.0})
    kind, e2e = found["vramtop_door_e2e_seconds"]
    assert kind == "gauge" and set(e2e) == {(("quantile", "0.5"),), (("quantile", "0.95"),)}
    assert 0 < e2e[(("quantile", "0.5"),)] <= e2e[(("quantile", "0.95"),)]
    assert "# HELP vramtop_door_longest_hold_seconds" in text
    # The test upstream answers in one piece: no decode speed was seen, so none is exported.
    assert "vramtop_door_decode_tokens_per_second" not in found


def test_the_exporter_without_a_door_serves_no_door_metric() -> None:
    backend = MachineBackend(sampler=Sampler(probe=_Card(), url=None), supervisor=None)
    exporter = Exporter(backend, clock=lambda: 1.0)
    exporter.sample_once()
    text = generate_latest(exporter.registry()).decode()
    backend.close(stop_server=False)
    assert "vramtop_gpu_memory_total_bytes" in text
    assert "vramtop_door_" not in text


class _Card:
    name = "test"

    def read(self) -> GpuReading:
        return CARD

    def close(self) -> None:
        pass
