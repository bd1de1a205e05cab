"""Unified memory and GTT in the split, the `--once --json` snapshot and recordings."""

from __future__ import annotations

import json
from pathlib import Path

from vramtop.core.model import (
    GIB,
    GpuDevice,
    GpuReading,
    MemoryKind,
    ProcessMemory,
    Sample,
    SplitMethod,
)
from vramtop.core.snapshot import snapshot
from vramtop.core.split import split_card
from vramtop.session.session_reader import read_session
from vramtop.session.writer import SessionWriter, make_header

POOL = 125487628 * 1024  # a DGX Spark's MemTotal


def spark(available: int) -> GpuDevice:
    used = POOL - available
    procs = (ProcessMemory(4242, "python3", 90 * GIB), ProcessMemory(900, "gnome-shell", GIB))
    return GpuDevice(
        0, "NVIDIA GB10", POOL, used, available, processes=procs, memory_kind=MemoryKind.UNIFIED
    )


def r9700() -> GpuDevice:
    procs = (
        ProcessMemory(4242, "python3", 27 * GIB, gtt_bytes=3 * GIB),
        ProcessMemory(900, "gnome-shell", 3 * GIB, gtt_bytes=GIB // 2),
    )
    return GpuDevice(
        0,
        "AMD Radeon AI PRO R9700",
        32 * GIB,
        31 * GIB,
        GIB,
        processes=procs,
        gtt_total_bytes=62 * GIB,
        gtt_used_bytes=4 * GIB,
    )


def test_unified_split_counts_the_rest_of_the_system_as_the_desktop() -> None:
    device = spark(available=20 * GIB)
    split = split_card(device, server_pids={4242}, server_running=True, util=0.75)
    assert split.method is SplitMethod.PER_PROCESS  # NVML's per-process numbers still work
    assert split.memory_kind is MemoryKind.UNIFIED
    assert split.total_bytes == POOL  # the calculator's total: the shared pool
    assert split.server_bytes == 90 * GIB
    assert split.desktop_bytes == POOL - 20 * GIB - 90 * GIB
    assert split.detail.startswith("Unified memory (shared with the system)")
    assert split.server_gtt_bytes is None


def test_gtt_split_gives_the_servers_memory_outside_vram() -> None:
    split = split_card(r9700(), server_pids={4242}, server_running=True, util=0.9)
    assert split.memory_kind is MemoryKind.DEDICATED
    assert split.server_gtt_bytes == 3 * GIB  # the desktop's GTT is not the server's
    assert split.server_bytes == 27 * GIB and split.desktop_bytes == 4 * GIB


def sample(device: GpuDevice) -> Sample:
    split = split_card(device, server_pids={4242}, server_running=True, util=0.9)
    return Sample(t=1.0, gpu=GpuReading(devices=(device,), source="sysfs"), split=split)


def test_snapshot_json_carries_the_memory_kind_and_gtt() -> None:
    data = snapshot(sample(r9700()), wsl=False, demo=False)
    gpu = data["gpus"][0]
    assert (gpu["memory_kind"], gpu["gtt_total_bytes"], gpu["gtt_used_bytes"]) == (
        "dedicated",
        62 * GIB,
        4 * GIB,
    )
    assert gpu["processes"][0]["gtt_bytes"] == 3 * GIB
    assert data["split"]["server_gtt_bytes"] == 3 * GIB
    unified = snapshot(sample(spark(20 * GIB)), wsl=False, demo=False)
    assert unified["gpus"][0]["memory_kind"] == unified["split"]["memory_kind"] == "unified"
    assert "gtt_bytes" not in unified["gpus"][0]["processes"][0]  # NVIDIA: not known, not 0
    json.dumps(unified)


def test_recordings_keep_the_memory_kind_and_gtt(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    for device in (spark(20 * GIB), r9700()):
        s = sample(device)
        header = make_header(
            started_at="2026-11-30T20:00:00Z", gpus=s.gpu.devices, info=None, wsl=False
        )
        with SessionWriter(path, header) as w:
            w.sample(s)
        _, records = read_session(path)
        back = next(r for r in records if isinstance(r, Sample))
        got = back.gpu.devices[0]
        assert got.memory_kind is device.memory_kind
        assert got.gtt_used_bytes == device.gtt_used_bytes
        assert got.processes is not None and device.processes is not None
        assert [p.gtt_bytes for p in got.processes] == [p.gtt_bytes for p in device.processes]
        assert back.split is not None and s.split is not None
        assert back.split.server_gtt_bytes == s.split.server_gtt_bytes
        assert back.split.memory_kind is device.memory_kind


def test_the_calculators_total_on_unified_memory_is_the_shared_pool() -> None:
    from vramtop.core.headroom.live_inputs import live_headroom_inputs
    from vramtop.core.model import CacheConfig, ServerMetrics, ServerReading

    cache = CacheConfig(
        gpu_memory_utilization=0.75,
        kv_cache_memory_bytes=69 * GIB,
        kv_cache_size_tokens=900_000,
        cache_dtype="fp8",
        block_size=16,
    )
    server = ServerReading(url="http://x", reachable=True, metrics=ServerMetrics(cache=cache))
    s = Sample(t=1.0, gpu=GpuReading(devices=(spark(20 * GIB),)), server=server)
    inputs = live_headroom_inputs(s)
    assert inputs is not None
    assert inputs.total_bytes == POOL
