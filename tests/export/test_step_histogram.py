"""The exporter's histogram of step seconds by phase: the steps the profile's timeline gains
while it runs, each counted once, in Prometheus's histogram form."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from vramtop.config import Profile
from vramtop.core.model import GIB, GpuDevice, GpuReading
from vramtop.event_log import EventLog
from vramtop.export.exporter import Exporter
from vramtop.machines.machine_backend import MachineBackend
from vramtop.machines.sampler import Sampler
from vramtop.supervisor import Supervisor

CARD = GpuReading(devices=(GpuDevice(0, "sim card", 32 * GIB, 10 * GIB, 22 * GIB),), source="sim")
NAME = "vramtop_step_phase_seconds"


class Card:
    def read(self) -> GpuReading:
        return CARD

    def close(self) -> None:
        pass


def histogram(exporter: Exporter) -> dict[str, float]:
    text = generate_latest(exporter.registry()).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name == NAME:
            assert family.type == "histogram"
            for s in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                out[f"{s.name.removeprefix(NAME)}{{{labels}}}"] = s.value
    return out


def test_each_step_written_while_it_runs_is_counted_once_by_phase() -> None:
    sup = Supervisor(Profile(name="steps", argv=["vllm", "serve", "m"], port=18_125))
    backend = MachineBackend(sampler=Sampler(probe=Card(), url=None), supervisor=sup)
    timeline = EventLog.for_profile("steps")
    timeline.append(900.0, "restart", {"result": "ok", "phases": {"total_s": 70.0}})
    exporter = Exporter(backend, clock=lambda: 1000.0)
    try:
        exporter.sample_once()
        assert histogram(exporter) == {}  # a step before its start is not counted
        phases = {"stopped_s": 1.5, "weights_s": 18.0, "total_s": 80.25, "weights_gib": 21.8}
        timeline.append(1100.0, "restart", {"result": "ok", "phases": phases})
        timeline.append(1150.0, "stop", {"result": "ok"})
        exporter.sample_once()
        exporter.sample_once()  # nothing new: nothing counted twice
        seen = histogram(exporter)
        assert seen["_count{phase=total}"] == 1 and seen["_sum{phase=total}"] == 80.25
        assert seen["_bucket{le=60.0,phase=total}"] == 0
        assert seen["_bucket{le=90.0,phase=total}"] == 1
        assert seen["_bucket{le=+Inf,phase=total}"] == 1
        assert seen["_sum{phase=stopped}"] == 1.5 and seen["_sum{phase=weights}"] == 18.0
        assert not any("weights_gib" in key for key in seen)  # a size is no phase
        timeline.append(1200.0, "relaunch", {"result": "ok", "phases": {"total_s": 30.0}})
        exporter.sample_once()
        seen = histogram(exporter)
        assert seen["_count{phase=total}"] == 2 and seen["_sum{phase=total}"] == 110.25
    finally:
        backend.close(stop_server=False)
