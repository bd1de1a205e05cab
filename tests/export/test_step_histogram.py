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


def step_series_of(exporter: Exporter) -> dict[str, float]:
    text = generate_latest(exporter.registry()).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name in ("vramtop_steps", "vramtop_last_step_timestamp_seconds") or (
            family.name == "vramtop_last_step_seconds"
        ):
            for s in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}"] = s.value
    return out


def test_the_steps_are_counted_by_who_asked_and_the_latest_of_each_kind_served() -> None:
    sup = Supervisor(Profile(name="counted", argv=["vllm", "serve", "m"], port=18_127))
    backend = MachineBackend(sampler=Sampler(probe=Card(), url=None), supervisor=sup)
    timeline = EventLog.for_profile("counted")
    before = {"result": "ok", "asked_by": "key", "phases": {"total_s": 70.0}}
    timeline.append(900.0, "restart", before)
    exporter = Exporter(backend, clock=lambda: 1000.0)
    try:
        exporter.sample_once()
        seen = step_series_of(exporter)
        # Counted from the exporter's start: every kind and asker at 0; the latest restart
        # is the one before its start.
        assert seen["vramtop_steps_total{asked_by=guard,kind=relaunch}"] == 0
        assert sum(v for k, v in seen.items() if k.startswith("vramtop_steps_total")) == 0
        assert (
            seen["vramtop_last_step_timestamp_seconds{asked_by=key,kind=restart,result=ok}"] == 900
        )
        assert seen["vramtop_last_step_seconds{kind=restart}"] == 70.0
        assert not any("kind=relaunch" in k for k in seen if "last_step" in k)
        timeline.append(
            1100.0, "relaunch", {"result": "rolled_back", "asked_by": "guard", "phases": {}}
        )
        timeline.append(
            1200.0, "relaunch", {"result": "ok", "asked_by": "guard", "phases": {"total_s": 41.5}}
        )
        timeline.append(1250.0, "restart", {"result": "ok", "phases": {"total_s": 80.0}})
        timeline.append(1300.0, "stop", {"result": "ok", "asked_by": "key"})  # not a step
        exporter.sample_once()
        exporter.sample_once()  # nothing new: nothing counted twice
        seen = step_series_of(exporter)
        assert seen["vramtop_steps_total{asked_by=guard,kind=relaunch}"] == 2
        # An event that names no asker was a command's (as the timeline's writer says).
        assert seen["vramtop_steps_total{asked_by=command,kind=restart}"] == 1
        assert seen["vramtop_steps_total{asked_by=key,kind=restart}"] == 0
        relaunch = "vramtop_last_step_timestamp_seconds{asked_by=guard,kind=relaunch,result=ok}"
        assert seen[relaunch] == 1200.0
        assert seen["vramtop_last_step_seconds{kind=relaunch}"] == 41.5
        restart = "vramtop_last_step_timestamp_seconds{asked_by=command,kind=restart,result=ok}"
        assert seen[restart] == 1250.0
    finally:
        backend.close(stop_server=False)


def test_a_watched_url_serves_no_steps() -> None:
    backend = MachineBackend(sampler=Sampler(probe=Card(), url=None), supervisor=None)
    exporter = Exporter(backend, clock=lambda: 1000.0)
    try:
        exporter.sample_once()
        assert step_series_of(exporter) == {}
    finally:
        backend.close(stop_server=False)
