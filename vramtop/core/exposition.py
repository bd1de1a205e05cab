"""What `vramtop export` exposes: the series one sample stands for (the metric list is
`metric_list`).

Pure: a sample and what the live session knows beside it (open findings, the throughput
view of its rates against the normal, the WSL VM's spill) go in, plain `(name, labels,
value)` series come out; the exporter turns them into Prometheus text. Only what vramtop
derives is exposed (vLLM's own /metrics and an NVML exporter already give the rest), in
base units, with prometheus_client's naming conventions: a `vramtop_` prefix, `_bytes`,
`_seconds`, `_ratio`, counters ending in `_total`, a `gpu` label on per-card numbers and a
`method` label on the split. An unknown value is an absent series, never a zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from vramtop.core import budget
from vramtop.core import sample_facts as read
from vramtop.core.diagnosis.normal_rate import REMEMBERED, NormalRate
from vramtop.core.diagnosis.suggested_budget import suggest_budget
from vramtop.core.diagnosis.throughput import ThroughputView
from vramtop.core.findings import KINDS, Finding, Kind
from vramtop.core.metric_list import ERROR_SOURCES
from vramtop.core.model import Sample, ServerMetrics, ServerState
from vramtop.core.series import Series, add
from vramtop.core.server_events import Event
from vramtop.core.snapshot import kv_pool, server_util
from vramtop.core.step_report import PhaseHistogram, StepCounts, UnderWay
from vramtop.core.supervision_series import (
    GuardView,
    door_series,
    guard_series,
    step_series,
    under_way_series,
)
from vramtop.core.vllm import args as vllm_args
from vramtop.core.windows.spill import SpillEvidence


@dataclass(frozen=True)
class Tally:
    """The counters, summed over the exporter's life from the samples and events it saw."""

    restarts: int = 0
    crashes: int = 0
    findings_opened: Mapping[str, int] = field(default_factory=dict)
    generation_tokens: float = 0.0
    prompt_tokens: float = 0.0
    preemptions: float = 0.0
    # The last fresh reading counted from (None: the next one is counted from, not counted).
    counted: ServerMetrics | None = None
    served: bool = False  # the server has served since the exporter started
    started: bool = False  # a start was seen since `counted`: the next counters begin at 0


def tally(before: Tally, sample: Sample, new_events: Sequence[Event]) -> Tally:
    """`before` with one more sample and the events that came with it.

    Tokens and preemptions count the growth of vLLM's counters between fresh readings (a
    server that started again counts from zero: its counters began again), so that
    `increase()` over a day spans restarts; a reading before the first one is not counted."""
    restarts, crashes = before.restarts, before.crashes
    opened = dict(before.findings_opened)
    started = before.started
    for event in new_events:
        if event.name == "start":
            restarts += int(before.served)
            started = True
        elif event.name == "finding" and event.detail.get("change") == "opened":
            kind = str(event.detail.get("kind"))
            opened[kind] = opened.get(kind, 0) + 1
            crashes += int(kind == Kind.SERVER_CRASHED)
    metrics = _fresh(sample)
    if metrics is None:
        return replace(
            before, restarts=restarts, crashes=crashes, findings_opened=opened, started=started
        )
    base = None if started else before.counted
    reset = base is not None and _fell(base, metrics)
    if reset and sample.info is None:
        restarts += 1  # a watched URL has no start events: its counters starting again are one
    zero = ServerMetrics() if started or reset else base

    def grew(field_: str) -> float:
        if zero is None:
            return 0.0
        old, new = getattr(zero, field_), getattr(metrics, field_)
        return max(0.0, new - (old or 0.0)) if new is not None else 0.0

    return Tally(
        restarts=restarts,
        crashes=crashes,
        findings_opened=opened,
        generation_tokens=before.generation_tokens + grew("generation_tokens_total"),
        prompt_tokens=before.prompt_tokens + grew("prompt_tokens_total"),
        preemptions=before.preemptions + grew("preemptions_total"),
        counted=metrics,
        served=True,
        started=False,
    )


def _fell(before: ServerMetrics, now: ServerMetrics) -> bool:
    """A counter went down: the server started again."""
    pairs = (
        (before.generation_tokens_total, now.generation_tokens_total),
        (before.prompt_tokens_total, now.prompt_tokens_total),
    )
    return any(old is not None and new is not None and new < old for old, new in pairs)


def _fresh(sample: Sample | None) -> ServerMetrics | None:
    """This sample's own reading of vLLM's /metrics (None: none, or an older one kept)."""
    server = sample.server if sample is not None else None
    if server is None or server.stale or not server.reachable:
        return None
    return server.metrics


def serving(sample: Sample) -> bool:
    """The server answered this sample and is not recorded as stopped or crashed: what it
    says describes it now. Otherwise its series are absent (an unknown value)."""
    if _fresh(sample) is None:
        return False
    return sample.info is None or sample.info.state in (ServerState.RUNNING, ServerState.STARTING)


@dataclass(frozen=True)
class ExportState:
    """Everything one exposition is made of; `sample` None before the first sample."""

    version: str
    sample: Sample | None = None
    open_findings: Sequence[Finding] = ()
    spill: SpillEvidence | None = None
    samples: int = 0
    errors: Mapping[str, int] = field(default_factory=dict)
    sampled_at: float | None = None  # Unix time of the latest sample
    sample_duration_s: float | None = None
    desktop_peak_bytes: int | None = None  # the largest desktop share seen so far
    outside_budget_bytes: int | None = None  # vLLM's memory outside its budget, as measured
    # The sample's rates against the normal, as the console shows them (None: not diagnosed).
    throughput: ThroughputView | None = None
    counts: Tally = field(default_factory=Tally)
    # The steps' phases seen since the exporter started, by phase (its histogram).
    steps: Mapping[str, PhaseHistogram] = field(default_factory=dict)
    # The profile's steps written to its timeline: counted since the exporter started, and
    # the latest of each kind (those before its start included).
    step_counts: StepCounts | None = None  # None: no profile (a watched URL)
    # The profile's guard (None: no profile, as for a watched URL: no guard series).
    guard: GuardView | None = None
    # The action any vramtop is taking on the profile's server now (None: none, or no profile).
    under_way: UnderWay | None = None


def series_for(state: ExportState) -> list[Series]:
    out = [Series("vramtop_build_info", 1.0, (("version", state.version),))]
    out += [
        Series(
            "vramtop_scrape_errors_total", float(state.errors.get(source, 0)), (("source", source),)
        )
        for source in ERROR_SOURCES
    ]
    out.append(Series("vramtop_samples_total", float(state.samples)))
    add(out, "vramtop_last_sample_timestamp_seconds", state.sampled_at)
    add(out, "vramtop_sample_duration_seconds", state.sample_duration_s)
    out += _counters(state.counts)
    out += guard_series(state.guard)
    out += step_series(state.step_counts)
    out += under_way_series(state.under_way, state.sampled_at)
    sample = state.sample
    if sample is None:
        return out
    out += _card(sample)
    out += _identity(sample)
    up = serving(sample)
    view = state.throughput if state.throughput and state.throughput.t == sample.t else None
    out += _server(sample, view.normal_generation_tps if up and view else None)
    if up and view is not None:
        out += _normal(view.normal)
        out += request_decode(view)
    out += _findings(sample, state.open_findings)
    out += _budget_for_peak(sample, state.desktop_peak_bytes, state.outside_budget_bytes)
    out += _windows(sample, state.spill)
    out += door_series(sample.door)
    return out


def _card(sample: Sample) -> list[Series]:
    out: list[Series] = []
    for device in sample.gpu.devices:
        gpu = str(device.index)
        kind = device.memory_kind.value
        add(out, "vramtop_gpu_info", 1.0, gpu=gpu, name=device.name, memory_kind=kind)
        add(out, "vramtop_gpu_memory_total_bytes", device.total_bytes, gpu=gpu)
        add(out, "vramtop_gpu_memory_used_bytes", device.used_bytes, gpu=gpu)
        add(out, "vramtop_gpu_gtt_total_bytes", device.gtt_total_bytes, gpu=gpu)
        add(out, "vramtop_gpu_gtt_used_bytes", device.gtt_used_bytes, gpu=gpu)
    split = sample.split
    if split is not None and sample.gpu.devices:
        gpu, method = str(sample.gpu.devices[0].index), split.method.value
        add(out, "vramtop_server_memory_bytes", split.server_bytes, gpu=gpu, method=method)
        add(out, "vramtop_desktop_memory_bytes", split.desktop_bytes, gpu=gpu, method=method)
        add(out, "vramtop_server_gtt_bytes", split.server_gtt_bytes, gpu=gpu)
        add(out, "vramtop_budget_bytes", split.budget_bytes, gpu=gpu)
        add(out, "vramtop_desktop_headroom_bytes", split.headroom_bytes, gpu=gpu)
    return out


def _server(sample: Sample, normal_tps: float | None) -> list[Series]:
    out: list[Series] = []
    server, info = sample.server, sample.info
    if server is not None:
        add(out, "vramtop_server_up", float(server.reachable and not server.stale))
    if info is not None:
        for state in ServerState:
            add(out, "vramtop_server_state", float(info.state is state), state=state.value)
    if server is not None or info is not None:
        expected = info is None or info.state not in (ServerState.STOPPED, ServerState.STOPPING)
        add(out, "vramtop_server_expected_up", float(expected))
    add(out, "vramtop_budget_ratio", server_util(sample))
    served_len = server.max_model_len if server is not None else None
    launched_len = info.max_model_len if info is not None else None
    add(out, "vramtop_max_model_len_tokens", served_len or launched_len)
    if not serving(sample):
        # A stopped, crashed or silent server has no pool, queue or rate now: the last
        # reading kept for the console is not exported as if it were current.
        return out
    pool = kv_pool(sample)
    add(out, "vramtop_kv_pool_bytes", pool.bytes)
    add(out, "vramtop_kv_pool_tokens", pool.tokens)
    add(out, "vramtop_kv_cache_usage_ratio", pool.usage)
    metrics = _fresh(sample)
    if metrics is not None:
        add(out, "vramtop_requests_running", metrics.requests_running)
        add(out, "vramtop_requests_waiting", metrics.requests_waiting)
    add(out, "vramtop_generation_tokens_per_second", sample.rates.generation_tps)
    add(out, "vramtop_generation_normal_tokens_per_second", normal_tps)
    return out


def request_decode(view: ThroughputView | None) -> list[Series]:
    """The per-request decode speed the diagnosis judged this second, in its measure, and the
    normal it was judged against (the same measure at the same concurrency): the frame's
    throughput view, as the console shows it. Compared with each other, a request still
    reading its prompt never reads as a collapse."""
    if view is None or view.per_request_tps is None or view.measure is None:
        return []
    out: list[Series] = []
    measure = view.measure
    add(out, "vramtop_request_decode_tokens_per_second", view.per_request_tps, measure=measure)
    add(
        out,
        "vramtop_request_decode_normal_tokens_per_second",
        view.normal_per_request_tps,
        measure=measure,
    )
    return out


def _identity(sample: Sample) -> list[Series]:
    """`vramtop_server_info`: which profile and model this box serves, for joins and legends.
    Kept while the server is down: it names what the box is set up to serve."""
    server, info = sample.server, sample.info
    metrics = server.metrics if server is not None else None
    model = (server.served_model if server is not None else None) or (
        metrics.model_name if metrics is not None else None
    )
    if model is None and info is not None and info.argv:
        try:
            model = vllm_args.find_model(info.argv)
        except ValueError:
            model = None
    profile = info.profile if info is not None else None
    version = (server.version if server is not None else None) or (
        sample.startup.version if sample.startup is not None else None
    )
    if model is None and profile is None and version is None:
        return []
    labels = (("profile", profile or ""), ("model", model or ""), ("vllm_version", version or ""))
    return [Series("vramtop_server_info", 1.0, labels)]


def _counters(counts: Tally) -> list[Series]:
    """Every counter from the exporter's start, at 0 until something happens: a counter that
    first appears at 1 loses its first increase to `increase()`."""
    out = [
        Series("vramtop_server_restarts_total", float(counts.restarts)),
        Series("vramtop_server_crashes_total", float(counts.crashes)),
        Series("vramtop_generation_tokens_total", counts.generation_tokens),
        Series("vramtop_prompt_tokens_total", counts.prompt_tokens),
        Series("vramtop_preemptions_total", counts.preemptions),
    ]
    out += [
        Series(
            "vramtop_findings_opened_total",
            float(counts.findings_opened.get(kind, 0)),
            (("kind", kind),),
        )
        for kind in KINDS
    ]
    return out


def _normal(normal: NormalRate | None) -> list[Series]:
    out: list[Series] = []
    if normal is None:
        return out
    if normal.measure is not None:
        add(out, "vramtop_decode_normal_tokens_per_second", normal.tps, measure=normal.measure)
    add(out, "vramtop_normal_rate_remembered", float(normal.source == REMEMBERED))
    if normal.source == REMEMBERED:
        add(out, "vramtop_normal_rate_saved_timestamp_seconds", normal.saved_at)
    return out


def _findings(sample: Sample, findings: Sequence[Finding]) -> list[Series]:
    open_kinds = {f.kind for f in findings if f.is_open}
    out = [
        Series("vramtop_finding_open", float(kind in open_kinds), (("kind", kind),))
        for kind in KINDS
    ]
    total = sample.gpu.devices[0].total_bytes if sample.gpu.devices else None
    gpu = str(sample.gpu.devices[0].index) if sample.gpu.devices else None
    for finding in findings:
        util = suggested_budget(finding)
        if util is None:
            continue
        add(out, "vramtop_suggested_budget_ratio", util, kind=finding.kind)
        if total and gpu is not None:
            bytes_ = budget.budget_bytes(total, util)
            add(out, "vramtop_suggested_budget_bytes", bytes_, gpu=gpu, kind=finding.kind)
    return out


def _budget_for_peak(sample: Sample, peak: int | None, outside: int | None) -> list[Series]:
    """The what-if's suggestion: the budget that leaves the desktop its peak plus the margin."""
    out: list[Series] = []
    if peak is None or not sample.gpu.devices:
        return out
    device = sample.gpu.devices[0]
    # The finding's rule, with what a sample tells of vLLM's startup checks (no squeeze: no
    # cap at the current budget, no unseen demand).
    fit = suggest_budget(
        device.total_bytes,
        peak,
        outside_budget_bytes=budget.outside_budget(outside),
        now=read.desktop_bytes(sample),
        smallest_serving=read.smallest_util_that_serves(sample),
    )
    add(out, "vramtop_desktop_peak_bytes", peak, gpu=str(device.index))
    add(out, "vramtop_budget_for_desktop_peak_ratio", fit.budget)
    return out


def suggested_budget(finding: Finding) -> float | None:
    """The --gpu-memory-utilization a finding's remedy proposes (None: it proposes none)."""
    util = finding.remedy.budget
    return util if util is not None and 0 < util <= 1 else None


def _windows(sample: Sample, spill: SpillEvidence | None) -> list[Series]:
    reading = sample.windows
    vm = reading.wsl_vm if reading is not None and reading.available else None
    if vm is None:
        return []
    out: list[Series] = []
    add(out, "vramtop_wsl_vm_dedicated_bytes", vm.dedicated_bytes)
    add(out, "vramtop_wsl_vm_shared_bytes", vm.shared_bytes)
    add(out, "vramtop_wsl_vm_spilled_bytes", spill.rise_bytes if spill is not None else 0)
    return out
