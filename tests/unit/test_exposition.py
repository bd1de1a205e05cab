"""What `vramtop export` exposes for a sample: the field report's collapse as series."""

from __future__ import annotations

from dataclasses import replace

from tests.support.synthetic import Card, build, field_report
from tests.unit.test_diagnosis_spill import CALL_AT, windows_side
from vramtop.core.adaptive_words import AdaptiveState
from vramtop.core.counter_window import CounterWindow
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.diagnosis.thresholds import COLLAPSE_RATIO
from vramtop.core.exposition import ExportState, series_for
from vramtop.core.findings import KINDS, VRAM_CONTENTION
from vramtop.core.metric_list import ERROR_SOURCES, METRICS, SPECS
from vramtop.core.model import GIB, GpuReading, Sample, ServerReading
from vramtop.core.series import Series
from vramtop.core.supervision_series import GuardView


def state_at(t: float, *, wsl: bool = True) -> ExportState:
    """The exporter's state after feeding the field report (WSL2, Windows side watched) up to
    second `t`, as the live session would have it."""
    diagnoser, timeline = Diagnoser(), CounterWindow()
    last: Sample | None = None
    for item in build(Card(wsl=wsl), field_report(call_at=CALL_AT)):
        if not isinstance(item, Sample):
            diagnoser.feed_event(*item)
            continue
        if item.t > t:
            break
        last = timeline.add(replace(item, windows=windows_side(item.t)) if wsl else item)
        diagnoser.feed_sample(last)
    return ExportState(
        version="9.9",
        sample=last,
        open_findings=tuple(diagnoser.open_findings()),
        throughput=diagnoser.throughput,
        spill=diagnoser.spill_evidence(),
        samples=int(t),
        errors={"server": 2},
        sampled_at=1_700_000_000.5,
        sample_duration_s=0.01,
    )


def values(series: list[Series], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {s.labels: s.value for s in series if s.name == name}


def one(series: list[Series], name: str) -> float:
    found = values(series, name)
    assert len(found) == 1, f"{name}: {found}"
    return next(iter(found.values()))


def test_during_the_collapse_the_finding_the_normal_rate_and_the_suggested_budget_show() -> None:
    series = series_for(state_at(CALL_AT + 60))
    assert values(series, "vramtop_finding_open") == {
        (("kind", kind),): float(kind == VRAM_CONTENTION) for kind in KINDS
    }
    normal = one(series, "vramtop_generation_normal_tokens_per_second")
    assert 75 <= normal <= 80  # the healthy 77 tok/s, not the collapsed 7-9
    assert one(series, "vramtop_generation_tokens_per_second") < COLLAPSE_RATIO * normal
    suggested = values(series, "vramtop_suggested_budget_ratio")
    assert list(suggested) == [(("kind", VRAM_CONTENTION),)]
    assert 0.5 < suggested[(("kind", VRAM_CONTENTION),)] < one(series, "vramtop_budget_ratio")
    budget = values(series, "vramtop_suggested_budget_bytes")
    assert list(budget) == [(("gpu", "0"), ("kind", VRAM_CONTENTION))]


def test_with_per_process_numbers_the_desktop_shows_over_its_allowance_in_the_call() -> None:
    # The alert rule's third sign. (A derived split cannot show it: there the desktop is what
    # the budget leaves, by construction, and the open finding raises the alert alone.)
    before = series_for(state_at(CALL_AT - 10, wsl=False))
    during = series_for(state_at(CALL_AT + 60, wsl=False))
    allowance = one(during, "vramtop_desktop_headroom_bytes")
    assert one(before, "vramtop_desktop_memory_bytes") < allowance
    assert one(during, "vramtop_desktop_memory_bytes") > allowance


def test_the_split_says_how_it_was_obtained() -> None:
    wsl = series_for(state_at(30))
    linux = series_for(state_at(30, wsl=False))
    assert [dict(s.labels)["method"] for s in wsl if s.name == "vramtop_server_memory_bytes"] == [
        "derived"
    ]
    assert [
        dict(s.labels)["method"] for s in linux if s.name == "vramtop_desktop_memory_bytes"
    ] == ["per_process"]


def test_the_wsl_vms_spill_is_zero_before_the_call_and_its_rise_after() -> None:
    before = series_for(state_at(CALL_AT - 10))
    assert one(before, "vramtop_wsl_vm_spilled_bytes") == 0
    after = series_for(state_at(CALL_AT + 40))
    spilled = one(after, "vramtop_wsl_vm_spilled_bytes")
    shared = one(after, "vramtop_wsl_vm_shared_bytes")
    assert spilled > GIB and shared - spilled == int(0.12 * GIB)
    # Without the Windows side nothing WSL-only is exposed (absent, not zero).
    linux = series_for(state_at(CALL_AT + 40, wsl=False))
    assert not [s for s in linux if s.name.startswith("vramtop_wsl_vm_")]


def test_before_the_first_sample_only_the_exporters_own_series_are_there() -> None:
    series = series_for(ExportState(version="1.2"))
    assert {s.name for s in series} == {
        "vramtop_build_info",
        "vramtop_scrape_errors_total",
        "vramtop_samples_total",
        # The exporter's own tallies, present at 0 from the start (for increase() over a day).
        "vramtop_server_restarts_total",
        "vramtop_server_crashes_total",
        "vramtop_findings_opened_total",
        "vramtop_generation_tokens_total",
        "vramtop_prompt_tokens_total",
        "vramtop_preemptions_total",
    }
    assert values(series, "vramtop_scrape_errors_total") == {
        (("source", source),): 0.0 for source in ERROR_SOURCES
    }


def test_unknown_values_are_absent_not_zero() -> None:
    sample = Sample(
        t=1.0,
        gpu=GpuReading(error="NVML: driver not loaded"),
        server=ServerReading("http://127.0.0.1:8000", reachable=False, error="refused"),
    )
    series = series_for(ExportState(version="1", sample=sample))
    names = {s.name for s in series}
    assert one(series, "vramtop_server_up") == 0
    for absent in (
        "vramtop_gpu_memory_total_bytes",
        "vramtop_server_memory_bytes",
        "vramtop_kv_cache_usage_ratio",
        "vramtop_generation_tokens_per_second",
        "vramtop_generation_normal_tokens_per_second",
        "vramtop_server_state",  # not supervised: vramtop only watches this server
        "vramtop_suggested_budget_ratio",
    ):
        assert absent not in names


def test_every_series_is_in_the_metric_list_with_its_labels() -> None:
    series = series_for(state_at(CALL_AT + 60))
    for s in series:
        assert tuple(name for name, _ in s.labels) == SPECS[s.name].labels, s
    assert len(SPECS) == len(METRICS)
    for spec in METRICS:
        assert spec.name.startswith("vramtop_")
        assert spec.name.endswith("_total") == (spec.kind == "counter")


def test_a_unified_amd_style_card_says_its_memory_kind_and_gtt() -> None:
    from vramtop.core.model import GpuDevice, MemoryKind, Split, SplitMethod

    device = GpuDevice(
        1,
        "Radeon",
        16 * GIB,
        15 * GIB,
        GIB,
        memory_kind=MemoryKind.UNIFIED,
        gtt_total_bytes=32 * GIB,
        gtt_used_bytes=3 * GIB,
    )
    split = Split(
        16 * GIB, 12 * GIB, 3 * GIB, GIB, SplitMethod.PER_PROCESS, "", server_gtt_bytes=2 * GIB
    )
    sample = Sample(t=0.0, gpu=GpuReading(devices=(device,), source="sysfs"), split=split)
    series = series_for(ExportState(version="1", sample=sample))
    assert values(series, "vramtop_gpu_info") == {
        (("gpu", "1"), ("name", "Radeon"), ("memory_kind", "unified")): 1.0
    }
    assert one(series, "vramtop_gpu_gtt_total_bytes") == 32 * GIB
    assert one(series, "vramtop_gpu_gtt_used_bytes") == 3 * GIB
    assert values(series, "vramtop_server_gtt_bytes") == {(("gpu", "1"),): 2 * GIB}


def test_a_normal_rate_learned_now_and_one_remembered_say_so() -> None:
    from vramtop.core.diagnosis.normal_rate import PER_REQUEST, REMEMBERED, NormalRate

    learned = series_for(state_at(CALL_AT - 10))
    assert one(learned, "vramtop_normal_rate_remembered") == 0
    assert "vramtop_normal_rate_saved_timestamp_seconds" not in {s.name for s in learned}
    decode = values(learned, "vramtop_decode_normal_tokens_per_second")
    assert len(decode) == 1 and 70 < next(iter(decode.values())) < 85

    remembered = NormalRate({PER_REQUEST: {1: 77.0}}, source=REMEMBERED, saved_at=1.7e9)
    at_5 = state_at(5)
    assert at_5.throughput is not None
    view = replace(at_5.throughput, normal=remembered)  # the view's normal is what is exported
    state = ExportState(version="1", sample=at_5.sample, throughput=view)
    series = series_for(state)
    assert one(series, "vramtop_normal_rate_remembered") == 1
    assert one(series, "vramtop_normal_rate_saved_timestamp_seconds") == 1.7e9
    assert values(series, "vramtop_decode_normal_tokens_per_second") == {
        (("measure", PER_REQUEST),): 77.0
    }


def test_the_budget_that_would_fit_leaves_the_desktop_its_peak_and_margin_and_no_more() -> None:
    import math

    from vramtop.core.diagnosis.thresholds import DESKTOP_MARGIN_BYTES

    sample = state_at(30, wsl=False).sample
    assert sample is not None
    total = sample.gpu.devices[0].total_bytes
    outside = GIB // 2
    for peak in (int(1.35 * GIB), int(4.3 * GIB)):
        state = ExportState(
            version="1", sample=sample, desktop_peak_bytes=peak, outside_budget_bytes=outside
        )
        series = series_for(state)
        util = one(series, "vramtop_budget_for_desktop_peak_ratio")
        assert one(series, "vramtop_desktop_peak_bytes") == peak

        def leaves(u: float) -> int:
            return total - math.ceil(total * u) - outside

        assert leaves(util) >= peak + DESKTOP_MARGIN_BYTES
        assert leaves(round(util + 0.01, 2)) < peak + DESKTOP_MARGIN_BYTES
    assert "vramtop_budget_for_desktop_peak_ratio" not in {
        s.name for s in series_for(ExportState(version="1", sample=sample))
    }


GUARD_SERIES = (
    "vramtop_guard_running",
    "vramtop_guard_auto_remedy",
    "vramtop_guard_adaptive_budget_ratio",
    "vramtop_guard_adaptive_stepped_down",
)


def guard_series_of(guard: GuardView | None) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    series = series_for(ExportState(version="9.9", guard=guard))
    return {name: found for name in GUARD_SERIES if (found := values(series, name))}


def test_the_guard_is_served_where_the_exporter_has_a_profile_each_fact_only_where_known() -> None:
    # A watched URL (no profile) has no guard: nothing, not a 0 that would read as "none".
    assert guard_series_of(None) == {}
    assert guard_series_of(GuardView(running=False)) == {"vramtop_guard_running": {(): 0.0}}
    # A guard whose lock does not say (an older vramtop's): running, its remedy unknown.
    assert guard_series_of(GuardView(running=True)) == {"vramtop_guard_running": {(): 1.0}}
    in_call = AdaptiveState(outside=0.92, during=0.8, down=100.0, up=None)
    assert guard_series_of(GuardView(running=True, auto_remedy=True, adaptive=in_call)) == {
        "vramtop_guard_running": {(): 1.0},
        "vramtop_guard_auto_remedy": {(): 1.0},
        "vramtop_guard_adaptive_budget_ratio": {
            (("budget", "outside"),): 0.92,
            (("budget", "during"),): 0.8,
        },
        "vramtop_guard_adaptive_stepped_down": {(): 1.0},
    }
    back_up = AdaptiveState(outside=0.92, during=0.8, down=100.0, up=200.0)
    served = guard_series_of(GuardView(running=True, auto_remedy=False, adaptive=back_up))
    assert served["vramtop_guard_auto_remedy"] == {(): 0.0}
    assert served["vramtop_guard_adaptive_stepped_down"] == {(): 0.0}
