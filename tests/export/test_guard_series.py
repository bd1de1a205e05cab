"""The exporter serves the profile's guard as the console knows it: a guard acts for the
profile while it holds the guard lock, whose file says whether it acts on its own, and an
adaptive guard's state file says its budgets and step."""

from __future__ import annotations

from vramtop.config import Profile
from vramtop.core.exposition import series_for
from vramtop.core.model import GIB, GpuDevice, GpuReading
from vramtop.core.series import Series
from vramtop.export.exporter import Exporter
from vramtop.machines.machine_backend import MachineBackend
from vramtop.machines.sampler import Sampler
from vramtop.supervisor import Supervisor
from vramtop.supervisor.actor import GUARD, ActorLock, guard_lock, write_guard_state

CARD = GpuReading(devices=(GpuDevice(0, "sim card", 32 * GIB, 10 * GIB, 22 * GIB),), source="sim")


class Card:
    def read(self) -> GpuReading:
        return CARD

    def close(self) -> None:
        pass


def guard_of(exporter: Exporter) -> dict[str, float]:
    exporter.sample_once()
    found: list[Series] = [
        s for s in series_for(exporter.state()) if s.name.startswith("vramtop_guard_")
    ]
    return {s.name + "".join(f"{{{v}}}" for _, v in s.labels): s.value for s in found}


def backend_of(name: str) -> MachineBackend:
    sup = Supervisor(Profile(name=name, argv=["vllm", "serve", "m"], port=18_126))
    backend = MachineBackend(sampler=Sampler(probe=Card(), url=None), supervisor=sup)
    backend.adaptive_read_s = 0.0  # every tick looks (the throttle is tested on its own)
    return backend


def test_a_guard_holding_the_lock_is_served_with_its_remedy_and_adaptive_step() -> None:
    backend = backend_of("guarded")
    exporter = Exporter(backend)
    try:
        assert guard_of(exporter) == {"vramtop_guard_running": 0.0}
        # What a guard holds while it runs (guard/loop.py): both locks; an adaptive one
        # writes its state (stepped down for a call at 100, not back up).
        only_guard = guard_lock("guarded", auto_remedy=True)
        actor = ActorLock("guarded", GUARD)
        assert only_guard.try_acquire() and actor.try_acquire()
        write_guard_state("guarded", outside=0.92, during=0.8, down=100.0, up=None)
        assert guard_of(exporter) == {
            "vramtop_guard_running": 1.0,
            "vramtop_guard_auto_remedy": 1.0,
            "vramtop_guard_adaptive_budget_ratio{outside}": 0.92,
            "vramtop_guard_adaptive_budget_ratio{during}": 0.8,
            "vramtop_guard_adaptive_stepped_down": 1.0,
        }
        only_guard.release()
        actor.release()
        assert guard_of(exporter) == {"vramtop_guard_running": 0.0}
        # A guard that only tells, not adaptive.
        tells = guard_lock("guarded", auto_remedy=False)
        assert tells.try_acquire()
        try:
            assert guard_of(exporter) == {
                "vramtop_guard_running": 1.0,
                "vramtop_guard_auto_remedy": 0.0,
            }
        finally:
            tells.release()
    finally:
        backend.close(stop_server=False)


def test_a_watched_url_serves_no_guard() -> None:
    backend = MachineBackend(sampler=Sampler(probe=Card(), url=None), supervisor=None)
    exporter = Exporter(backend)
    try:
        assert guard_of(exporter) == {}
    finally:
        backend.close(stop_server=False)
