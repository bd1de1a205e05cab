"""The VRAM panel's headroom (the split's) and the what-if's (the headroom inputs') are one
figure: both count what the server was measured to hold beyond its budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtop.core.budget import budget_bytes
from vramtop.core.headroom.calculator import predict
from vramtop.core.model import (
    GIB,
    MIB,
    GpuDevice,
    GpuReading,
    ProcessMemory,
    ServerInfo,
    ServerState,
)
from vramtop.machines.machine_backend import MachineBackend
from vramtop.machines.sampler import Sampler

TOTAL = 32_607 * MIB
UTIL = 0.93
OUTSIDE = round(0.35 * GIB)  # the CUDA context: less than the estimate the split began with
SERVER_PID = 4242
STARTUP = (
    "INFO 11-14 09:00:08 [gpu_worker.py:310] Available KV cache memory: 9.26 GiB\n"
    "INFO 11-14 09:00:09 [kv_cache_utils.py:1230] GPU KV cache size: 120,832 tokens, "
    "Maximum concurrency for 163,840 tokens per request: 0.74x\n"
)


class Card:
    """Per-process memory as the driver lists it: the server at its budget plus its context."""

    def read(self) -> GpuReading:
        server = budget_bytes(TOTAL, UTIL) + OUTSIDE
        desktop = round(1.35 * GIB)
        processes = (
            ProcessMemory(SERVER_PID, "python3", server),
            ProcessMemory(900, "Xorg", desktop),
        )
        used = server + desktop
        return GpuReading(
            devices=(GpuDevice(0, "RTX 5090", TOTAL, used, TOTAL - used, processes=processes),),
            source="sim",
        )

    def close(self) -> None:
        pass


def test_the_splits_headroom_is_the_what_ifs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    log = tmp_path / "server.log"
    log.write_text(STARTUP)
    info = ServerInfo(state=ServerState.RUNNING, pid=SERVER_PID, pids=(SERVER_PID,), budget=UTIL)
    sampler = Sampler(probe=Card(), url=None, info=lambda: info, log_path=lambda: log)
    backend = MachineBackend(sampler=sampler, supervisor=None)
    try:
        for _ in range(3):
            frame = backend.tick()
    finally:
        backend.close(stop_server=False)
    split = frame.sample.split
    assert split is not None and frame.headroom_inputs is not None
    what_if = predict(frame.headroom_inputs, UTIL).desktop_headroom_bytes
    assert split.headroom_bytes == what_if == TOTAL - budget_bytes(TOTAL, UTIL) - OUTSIDE
