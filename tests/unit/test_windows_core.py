"""The Windows side, pure: parsing PowerShell's lines, attribution, spill evidence, samples."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from vramtop.core.findings import Ladder
from vramtop.core.model import GIB, MIB
from vramtop.core.windows.attribution import parse_process_instance, windows_name
from vramtop.core.windows.powershell import parse_line
from vramtop.core.windows.prose import SYSMEM_FALLBACK_ADVICE, cite_spill, with_spill
from vramtop.core.windows.reading import WindowsGpuReading, WindowsProcessGpu
from vramtop.core.windows.session_fields import reading_from_sample, windows_sample_fields
from vramtop.core.windows.spill import SPILL_THRESHOLD_BYTES, SpillTracker, VmPoint, spill_evidence

NV = "0x00000000_0x0000C3F1"
IGPU = "0x00000000_0x0000A1B2"


def row(pid: int, luid: str, dedicated: int, shared: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "Name": f"pid_{pid}_luid_{luid}_phys_0",
        "DedicatedUsage": dedicated,
        "SharedUsage": shared,
        "TotalCommitted": dedicated + shared,
        **extra,
    }


def adapter(luid: str, dedicated: int, shared: int = 0) -> dict[str, Any]:
    return {
        "Name": f"luid_{luid}_phys_0",
        "DedicatedUsage": dedicated,
        "SharedUsage": shared,
        "TotalCommitted": dedicated + shared,
    }


def line(processes: Any, adapters: Any, names: dict[str, str]) -> str:
    return json.dumps({"v": 1, "processes": processes, "adapters": adapters, "names": names})


FIELD = line(
    [
        row(5520, NV, 29 * GIB, 120 * MIB),
        row(1234, NV, 550 * MIB, 4 * MIB),
        row(1234, IGPU, 80 * MIB, 30 * MIB),
        row(10456, NV, 2650 * MIB),
        row(8812, NV, 650 * MIB),
        row(777, NV, 20 * MIB),
    ],
    [adapter(NV, 33 * GIB), adapter(IGPU, 128 * MIB, 400 * MIB)],
    {"5520": "vmmemWSL", "1234": "dwm", "10456": "ms-teams", "8812": "msedge"},
)


def test_instance_names_parse_as_windows_exporter_reads_them() -> None:
    assert parse_process_instance("pid_1234_luid_0x00000000_0x0000C3F1_phys_0") == (
        1234,
        "0x00000000_0x0000c3f1",
    )
    assert parse_process_instance("luid_0x00000000_0x0000C3F1_phys_0") is None
    assert parse_process_instance("pid_x_luid_0x0_0x1_phys_0") is None


def test_the_vm_and_the_desktop_on_the_big_card_only() -> None:
    r = parse_line(FIELD + "\r\n", t=5.0)
    assert r.available and r.t == 5.0
    assert r.adapter_luid == NV.lower()
    assert r.wsl_vm == WindowsProcessGpu(5520, "vmmemWSL", 29 * GIB, 120 * MIB)
    # Sorted by dedicated bytes; dwm's iGPU share is not counted on the NVIDIA card.
    assert [(p.name, p.dedicated_bytes) for p in r.desktop] == [
        ("ms-teams.exe", 2650 * MIB),
        ("msedge.exe", 650 * MIB),
        ("dwm.exe", 550 * MIB),
        ("pid 777", 20 * MIB),
    ]
    assert r.desktop_bytes == (2650 + 650 + 550 + 20) * MIB
    assert {a.luid for a in r.adapters} == {NV.lower(), IGPU.lower()}


def test_instances_of_one_pid_are_summed_per_adapter() -> None:
    text = line(
        [row(9, NV, 100, 1), {**row(9, NV, 50, 2), "Name": f"pid_9_luid_{NV}_phys_1"}],
        [adapter(NV, 150)],
        {"9": "chrome"},
    )
    (p,) = parse_line(text, 0).processes
    assert (p.dedicated_bytes, p.shared_bytes) == (150, 3)


def test_local_usage_is_preferred_over_dedicated_usage_when_present() -> None:
    text = line(
        [row(1, NV, 999, 7, LocalUsage=500, NonLocalUsage=300)], [adapter(NV, 1)], {"1": "x"}
    )
    (p,) = parse_line(text, 0).processes
    assert (p.dedicated_bytes, p.shared_bytes) == (500, 300)


def test_a_single_instance_arrives_as_a_bare_object_and_numbers_as_strings() -> None:
    # ConvertTo-Json writes a lone element without the array; uint64 may come as a string.
    text = json.dumps(
        {
            "processes": {**row(5520, NV, 0, 0), "DedicatedUsage": "1073741824"},
            "adapters": adapter(NV, GIB),
            "names": {"5520": "vmmemWSL"},
        }
    )
    r = parse_line(text, 0)
    assert r.wsl_vm is not None and r.wsl_vm.dedicated_bytes == GIB


def test_windows10_vmmem_is_the_vm_only_without_vmmemwsl() -> None:
    both = line(
        [row(1, NV, 10 * GIB), row(2, NV, 64 * MIB)],
        [adapter(NV, 11 * GIB)],
        {"1": "vmmemWSL", "2": "vmmem"},
    )
    r = parse_line(both, 0)
    assert r.wsl_vm is not None and r.wsl_vm.name == "vmmemWSL"
    assert [p.name for p in r.desktop] == ["vmmem"]
    win10 = line([row(2, NV, 10 * GIB)], [adapter(NV, 10 * GIB)], {"2": "vmmem"})
    r10 = parse_line(win10, 0)
    assert r10.wsl_vm is not None and r10.wsl_vm.name == "vmmem" and r10.desktop == ()


def test_no_vm_running_is_a_reading_without_a_vm() -> None:
    r = parse_line(line([row(1, NV, GIB)], [adapter(NV, GIB)], {"1": "dwm"}), 0)
    assert r.available and r.wsl_vm is None and r.desktop[0].name == "dwm.exe"


def test_errors_become_reasons_for_the_panel() -> None:
    absent = parse_line('{"v":1,"error":"Invalid class "}', 0)
    assert absent.error is not None and "no GPU performance counters" in absent.error
    assert absent.panel_text is not None
    assert absent.panel_text.startswith("Windows side not available: ")
    cim = parse_line('{"v":1,"error":"Provider load failure "}', 0)
    assert cim.error == "the GPU counter query failed: Provider load failure"
    garbage = parse_line("Get-CimInstance : weird {", 0)
    assert garbage.error is not None and "not JSON" in garbage.error
    empty = parse_line('{"processes":[],"adapters":[],"names":{}}', 0)
    assert empty.error is not None and "no GPU memory counters" in empty.error
    assert parse_line("[1,2]", 0).error is not None
    assert parse_line("", 0).error is not None


@given(st.text(max_size=200))
def test_parse_line_never_raises(text: str) -> None:
    r = parse_line(text, 1.0)
    assert isinstance(r, WindowsGpuReading)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4),
        max_leaves=20,
    )
)
def test_any_json_shape_gives_a_reading(value: Any) -> None:
    shapes = [value, {"processes": value, "adapters": value, "names": value}]
    for shape in shapes:
        assert isinstance(parse_line(json.dumps(shape), 0), WindowsGpuReading)


def test_names_look_like_task_manager() -> None:
    assert windows_name("dwm") == "dwm.exe"
    assert windows_name("ms-teams.exe") == "ms-teams.exe"
    assert windows_name("vmmemWSL") == "vmmemWSL"
    assert windows_name("Memory Compression") == "Memory Compression"


def vm_reading(t: float, dedicated: int, shared: int, pid: int = 5520) -> WindowsGpuReading:
    return WindowsGpuReading(wsl_vm=WindowsProcessGpu(pid, "vmmemWSL", dedicated, shared), t=t)


def test_no_evidence_while_shared_usage_stays_near_its_baseline() -> None:
    tracker = SpillTracker()
    for i in range(10):
        tracker.add(vm_reading(i, 29 * GIB, 120 * MIB + i * MIB))
    assert tracker.spill_evidence() is None
    assert len(tracker.series) == 10


def test_a_call_that_spills_is_observed_evidence() -> None:
    tracker = SpillTracker()
    shared = [120, 120, 121, 180, 600, 1400, 2500, 2500]
    for i, mib in enumerate(shared):
        tracker.add(vm_reading(10.0 * i, 29 * GIB - (mib - 120) * MIB, mib * MIB))
    ev = tracker.spill_evidence()
    assert ev is not None
    assert ev.level == "observed"
    assert ev.first_seen_t == 40.0  # 600 MiB is the first point > 256 MiB above 120
    assert ev.baseline_shared_bytes == 120 * MIB
    assert ev.rise_bytes == (2500 - 120) * MIB
    assert ev.peak_shared_bytes == 2500 * MIB
    assert "rose by 2.32 GiB" in ev.summary
    assert ev.as_evidence()["wsl_vm_shared_rise_bytes"] == ev.rise_bytes


def test_the_threshold_is_strict_and_the_baseline_is_the_lowest_early_point() -> None:
    base = 100 * MIB
    points = [VmPoint(0, GIB, base + 50 * MIB), VmPoint(1, GIB, base), VmPoint(2, GIB, base)]
    at = [*points, VmPoint(3, GIB, base + SPILL_THRESHOLD_BYTES)]
    assert spill_evidence(at) is None
    over = [*points, VmPoint(3, GIB, base + SPILL_THRESHOLD_BYTES + 1)]
    ev = spill_evidence(over)
    assert ev is not None and ev.baseline_shared_bytes == base


def test_errors_and_missing_vm_are_skipped_and_a_new_vm_restarts_the_series() -> None:
    tracker = SpillTracker()
    tracker.add(vm_reading(0, GIB, 100 * MIB))
    tracker.add(vm_reading(1, GIB, 2 * GIB))
    tracker.add(WindowsGpuReading(error="waiting for PowerShell", t=2))
    tracker.add(WindowsGpuReading(t=3))
    assert len(tracker.series) == 2 and tracker.spill_evidence() is not None
    tracker.add(vm_reading(4, GIB, 2 * GIB, pid=9999))  # wsl --shutdown, a new VM
    assert len(tracker.series) == 1 and tracker.spill_evidence() is None


def test_the_baseline_survives_the_bounded_series() -> None:
    tracker = SpillTracker(max_points=5)
    tracker.add(vm_reading(0, GIB, 100 * MIB))
    for i in range(1, 20):
        tracker.add(vm_reading(i, GIB, 1 * GIB))
    ev = tracker.spill_evidence()
    assert len(tracker.series) == 5
    assert ev is not None and ev.baseline_shared_bytes == 100 * MIB


def test_sample_fields_round_trip() -> None:
    r = parse_line(FIELD, 12.0)
    fields = windows_sample_fields(r)
    body = fields["windows"]
    assert body["wsl_vm_dedicated_bytes"] == 29 * GIB
    assert body["wsl_vm_shared_bytes"] == 120 * MIB
    assert body["desktop"][0] == {
        "pid": 10456,
        "name": "ms-teams.exe",
        "dedicated_bytes": 2650 * MIB,
        "shared_bytes": 0,
    }
    back = reading_from_sample(json.loads(json.dumps({"t": 12.0, **fields})))
    assert back is not None and back.wsl_vm is not None
    assert back.wsl_vm.shared_bytes == 120 * MIB and back.t == 12.0
    assert [p.name for p in back.desktop] == [p.name for p in r.desktop]


def test_sample_fields_for_unknown_and_failed_sources() -> None:
    assert windows_sample_fields(None) == {}
    failed = windows_sample_fields(WindowsGpuReading(error="powershell.exe not found"))
    assert failed == {"windows": {"error": "powershell.exe not found"}}
    back = reading_from_sample({"t": 1, **failed})
    assert back is not None and back.error == "powershell.exe not found"
    assert reading_from_sample({"t": 1}) is None


def test_the_advice_names_the_setting_and_the_wsl_caveat() -> None:
    assert "CUDA - Sysmem Fallback Policy" in SYSMEM_FALLBACK_ADVICE
    assert "546.01" in SYSMEM_FALLBACK_ADVICE
    assert "WSL2" in SYSMEM_FALLBACK_ADVICE and "ignore" in SYSMEM_FALLBACK_ADVICE


def test_cite_spill_moves_the_rung_from_hypothesis_to_observed() -> None:
    ladder = {
        "observed": ["tokens/s fell to 9.0 from a healthy 80.0"],
        "inferred": ["the desktop and vLLM are competing for physical VRAM"],
        "hypothesis": [
            "some of vLLM's memory lost VRAM residency and is served from system memory, "
            "so PCIe traffic slows every decode step"
        ],
    }
    typed = Ladder.from_json(ladder)
    same, ev = cite_spill(typed, None).to_json(), with_spill({"ratio": 0.1}, None)
    assert same == ladder and ev == {"ratio": 0.1}
    points = [VmPoint(0, 29 * GIB, 120 * MIB), VmPoint(60, 27 * GIB, 2 * GIB + 120 * MIB)]
    spill = spill_evidence(points)
    assert spill is not None
    cited, ev = cite_spill(typed, spill).to_json(), with_spill({"ratio": 0.1}, spill)
    assert cited["hypothesis"] == []
    assert "rose by 2.00 GiB" in cited["observed"][-1]
    assert len(cited["inferred"]) == 2
    assert ev["spill_level"] == "observed" and ev["wsl_vm_shared_rise_bytes"] == 2 * GIB
    assert ev["ratio"] == 0.1
    assert typed.hypothesis != ()  # the input is not modified


def test_a_superscript_pid_key_is_ignored_not_raised() -> None:
    from vramtop.core.windows.powershell import reading_from_json

    reading = reading_from_json({"processes": [], "adapters": [{}], "names": {"¹": "x"}}, 0.0)
    assert reading is not None


def test_a_line_nested_deeper_than_the_parser_recurses_is_not_json() -> None:
    r = parse_line("[" * 100_000, 0)
    assert r.error is not None and "not JSON" in r.error
