"""The metric list of `vramtop export`: each family's name as scraped, type, help and
labels (docs/prometheus.md's table says the same, a test keeps them together). The series
one sample stands for are `exposition`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

GAUGE = "gauge"
COUNTER = "counter"
HISTOGRAM = "histogram"

# Where `vramtop_scrape_errors_total` counts failures: a tick's sources, and the sampler itself.
ERROR_SOURCES = ("gpu", "server", "windows", "sampler")


@dataclass(frozen=True)
class MetricSpec:
    """One metric family: its name as scraped (counters with `_total`), type, help, labels."""

    name: str
    kind: str
    help: str
    labels: tuple[str, ...] = ()


def _g(name: str, help: str, *labels: str) -> MetricSpec:
    return MetricSpec(f"vramtop_{name}", GAUGE, help, labels)


def _c(name: str, help: str, *labels: str) -> MetricSpec:
    """A counter, named as scraped (with `_total`)."""
    return MetricSpec(f"vramtop_{name}_total", COUNTER, help, labels)


# The metric list (docs/prometheus.md's table says the same, a test keeps them together).
METRICS: tuple[MetricSpec, ...] = (
    _g("build_info", "vramtop's version (always 1).", "version"),
    _g(
        "gpu_info",
        "1 per card: its name and memory kind (dedicated VRAM, or unified: the system's "
        "memory shared with the CPU, whose numbers the memory metrics then are).",
        "gpu",
        "name",
        "memory_kind",
    ),
    _g("gpu_memory_total_bytes", "The card's memory.", "gpu"),
    _g("gpu_memory_used_bytes", "The card's memory in use, by everything.", "gpu"),
    _g("gpu_gtt_total_bytes", "AMD: GTT, the system memory the card maps.", "gpu"),
    _g("gpu_gtt_used_bytes", "AMD: GTT in use (where VRAM overflows).", "gpu"),
    _g(
        "server_memory_bytes",
        "vLLM's share of the card; `method` says how the split was obtained "
        "(per_process, derived, windows).",
        "gpu",
        "method",
    ),
    _g(
        "desktop_memory_bytes",
        "Everything else's share of the card: the desktop and other programs.",
        "gpu",
        "method",
    ),
    _g(
        "server_gtt_bytes",
        "AMD: vLLM's buffers in GTT (system memory): VRAM that overflowed.",
        "gpu",
    ),
    _g("budget_bytes", "vLLM's budget: ceil(total x --gpu-memory-utilization).", "gpu"),
    _g(
        "desktop_headroom_bytes",
        "What the desktop may use beside vLLM: total - budget - vLLM's memory outside it.",
        "gpu",
    ),
    _g("budget_ratio", "vLLM's --gpu-memory-utilization."),
    # Added: the context the box serves, for `vramtop fleet`'s row.
    _g(
        "max_model_len_tokens",
        "vLLM's --max-model-len: the longest request it serves (as its /v1/models says, else "
        "the launch's flag).",
    ),
    _g(
        "suggested_budget_ratio",
        "The --gpu-memory-utilization an open finding suggests relaunching with.",
        "kind",
    ),
    _g("suggested_budget_bytes", "The suggested budget in bytes of the card.", "gpu", "kind"),
    _g("desktop_peak_bytes", "The desktop's largest share seen since the exporter started.", "gpu"),
    _g(
        "budget_for_desktop_peak_ratio",
        "The largest --gpu-memory-utilization that leaves the desktop its peak plus a margin "
        "(the what-if's suggested budget): the budget that would fit.",
    ),
    _g("wsl_vm_dedicated_bytes", "WSL2: the WSL VM's GPU memory in VRAM (Windows' counters)."),
    _g(
        "wsl_vm_shared_bytes",
        "WSL2: the WSL VM's shared GPU memory (system memory the GPU reads over PCIe).",
    ),
    _g(
        "wsl_vm_spilled_bytes",
        "WSL2: how far the VM's shared memory rose above its level at the server's start, "
        "once past vramtop's spill threshold; 0 while it has not spilled.",
    ),
    _g("kv_pool_bytes", "vLLM's KV cache pool."),
    _g("kv_pool_tokens", "Tokens the KV cache pool holds."),
    _g("kv_cache_usage_ratio", "The share of the KV pool in use."),
    _g("requests_running", "Requests vLLM is running."),
    _g("requests_waiting", "Requests waiting for room in the KV pool."),
    _g("generation_tokens_per_second", "Decode rate: generated tokens per second."),
    _g(
        "generation_normal_tokens_per_second",
        "The generation rate the running requests normally reach: the normal per-request "
        "rate at this concurrency times the requests running (a collapse never teaches it).",
    ),
    _g(
        "decode_normal_tokens_per_second",
        "The normal decode speed of one request at the lowest concurrency known; `measure`: "
        "inter_token_latency (vLLM's histogram) or per_request (the fallback).",
        "measure",
    ),
    _g(
        "normal_rate_remembered",
        "1 when the normal rate is remembered from an earlier run of the same setup, 0 when "
        "it was learned on this one.",
    ),
    _g(
        "normal_rate_saved_timestamp_seconds",
        "When a remembered normal rate was last learned (Unix time).",
    ),
    _g("finding_open", "1 while vramtop's finding of this kind is open, else 0.", "kind"),
    _g("server_up", "1 when vLLM answered this sample's scrape, else 0."),
    _g(
        "server_state",
        "1 for the supervised server's state (starting, running, stopping, stopped, crashed).",
        "state",
    ),
    MetricSpec(
        "vramtop_scrape_errors_total",
        COUNTER,
        "Samples in which one of vramtop's sources failed (gpu, server, windows) or the "
        "sampler itself did (sampler).",
        ("source",),
    ),
    MetricSpec("vramtop_samples_total", COUNTER, "Samples taken since the exporter started."),
    _g("last_sample_timestamp_seconds", "When the latest sample was taken (Unix time)."),
    _g("sample_duration_seconds", "How long the latest sample took to read every source."),
    # Added: the per-request decode rate the diagnosis judges, beside its own normal.
    _g(
        "request_decode_tokens_per_second",
        "The speed each running request decoded at since the previous sample, as the "
        "diagnosis measures it; `measure`: inter_token_latency (vLLM's histogram), else "
        "per_request (the total over the running requests) or per_request_prefill (the same "
        "in a second that also read a prompt).",
        "measure",
    ),
    _g(
        "request_decode_normal_tokens_per_second",
        "The normal per-request decode speed at the current concurrency, in the same measure: "
        "what vramtop_request_decode_tokens_per_second is compared with.",
        "measure",
    ),
    _g(
        "server_expected_up",
        "1 when vramtop expects the server to serve (a watched URL; a supervised server that "
        "is starting, running or crashed), 0 when it was stopped on request.",
    ),
    _g(
        "action_under_way_seconds",
        "Seconds so far of the start, stop, restart or relaunch any vramtop is taking on the "
        "profile's server now (a console's key, a guard, a command, the automatic restart "
        "after a crash); absent while none is.",
        "action",
    ),
    _g(
        "server_info",
        "1; the watched server's identity: profile, model and vLLM version (empty: unknown).",
        "profile",
        "model",
        "vllm_version",
    ),
    _c(
        "server_restarts",
        "Starts of the server after it had served (restarts, relaunches, "
        "automatic restarts; a watched URL: its counters starting again).",
    ),
    _c("server_crashes", "server_crashed findings opened: exits and deaths nobody asked for."),
    _c("findings_opened", "vramtop's findings opened, by kind.", "kind"),
    _c("generation_tokens", "Tokens vLLM generated while the exporter watched it."),
    _c("prompt_tokens", "Prompt tokens vLLM read while the exporter watched it."),
    _c("preemptions", "Requests vLLM preempted (evicted from the KV pool) while watched."),
    # Added: what the profile's front door sees (only where one answers).
    _g("door_in_flight", "Requests the front door forwarded that are not answered whole yet."),
    _g("door_held", "Requests waiting at the front door for the server (a restart under way)."),
    _c(
        "door_requests",
        "Requests the front door answered since its start: served (forwarded and answered "
        "whole) or failed (its own error, or a stream broken off).",
        "result",
    ),
    _g(
        "door_ttft_seconds",
        "Time to first token as the clients saw it through the front door, over its latest "
        "generation requests; `quantile` 0.5 or 0.95.",
        "quantile",
    ),
    _g(
        "door_e2e_seconds",
        "End-to-end latency per request through the front door, over its latest generation "
        "requests; `quantile` 0.5 or 0.95.",
        "quantile",
    ),
    _g(
        "door_decode_tokens_per_second",
        "The speed each request decoded at as its client saw it through the front door (text "
        "events after the first chunk, over the time to the last), over its latest generation "
        "requests: a second opinion beside vLLM's histogram; `quantile` 0.5.",
        "quantile",
    ),
    _g(
        "door_longest_hold_seconds",
        "The longest any request has waited at the front door since its start, those "
        "waiting now included.",
    ),
    # Added: the profile's guard, for `vramtop fleet`'s row (only where the exporter has a
    # profile: a watched URL has no guard).
    _g("guard_running", "1 while a vramtop guard holds the profile's guard lock, else 0."),
    _g(
        "guard_auto_remedy",
        "Where a guard runs: 1 when it relaunches a collapse on its own between turns "
        "(auto remedy), 0 when it only tells.",
    ),
    _g(
        "guard_adaptive_budget_ratio",
        "Where a guard runs adaptively: its --gpu-memory-utilization outside calls and "
        "during a call, by `budget` (outside, during).",
        "budget",
    ),
    _g(
        "guard_adaptive_stepped_down",
        "Where a guard runs adaptively: 1 while it has stepped the budget down for a call "
        "(the during budget in force), 0 at the outside budget.",
    ),
    # Added: the profile's steps, for `vramtop fleet`'s `e`.
    _c(
        "steps",
        "Starts, restarts and relaunches of the supervised server written to the profile's "
        "timeline since the exporter started, by `kind` and `asked_by` (key, command, "
        "guard, auto_restart).",
        "kind",
        "asked_by",
    ),
    _g(
        "last_step_timestamp_seconds",
        "When the profile's latest step of each `kind` was written to its timeline (Unix "
        "time; steps before the exporter started included), with who asked and its `result` "
        "(ok, rolled_back, failed, interrupted).",
        "kind",
        "asked_by",
        "result",
    ),
    _g(
        "last_step_seconds",
        "How long the latest step of each `kind` took, start to ready (its phases' total).",
        "kind",
    ),
    # Added: how long each phase of a start, restart or relaunch took.
    MetricSpec(
        "vramtop_step_phase_seconds",
        HISTOGRAM,
        "Seconds each phase of the supervised server's starts, restarts and relaunches took "
        "since the exporter started, by `phase`: vramtop's own (held, drained, stopped, "
        "memory_released, launched, ready), vLLM's from its log (weights, "
        "compile, graphs, engine_init) and the whole step (total).",
        ("phase",),
    ),
)
SPECS: Mapping[str, MetricSpec] = {spec.name: spec for spec in METRICS}
