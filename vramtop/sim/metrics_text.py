"""The fake server's /metrics page: vLLM's metric names, HELP/TYPE lines and label shapes."""

from __future__ import annotations

from collections.abc import Mapping

from vramtop.sim.serving import Histogram, Scheduler


def _labels(pairs: Mapping[str, object]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in pairs.items())
    return "{" + inner + "}"


def render(
    sched: Scheduler, model_name: str, cache_info: Mapping[str, object], created: float
) -> str:
    base = {"engine": "0", "model_name": model_name}
    lab = _labels(base)
    out: list[str] = []

    def metric(name: str, kind: str, help_: str, value: float) -> None:
        out.append(f"# HELP vllm:{name} {help_}")
        out.append(f"# TYPE vllm:{name} {kind}")
        out.append(f"vllm:{name}{lab} {float(value)!r}")

    def counter(name: str, help_: str, value: float) -> None:
        metric(f"{name}_total", "counter", help_, value)
        metric(f"{name}_created", "gauge", help_, created)

    def histogram(name: str, help_: str, h: Histogram) -> None:
        out.append(f"# HELP vllm:{name} {help_}")
        out.append(f"# TYPE vllm:{name} histogram")
        for edge, count in zip(h.buckets, h.counts, strict=True):
            out.append(f"vllm:{name}_bucket{_labels({**base, 'le': edge})} {float(count)!r}")
        out.append(f"vllm:{name}_bucket{_labels({**base, 'le': '+Inf'})} {float(h.n)!r}")
        out.append(f"vllm:{name}_count{lab} {float(h.n)!r}")
        out.append(f"vllm:{name}_sum{lab} {h.total!r}")

    with sched.lock:
        running, waiting = len(sched.running), sched.waiting
    metric(
        "num_requests_running", "gauge", "Number of requests in model execution batches.", running
    )
    metric("num_requests_waiting", "gauge", "Number of requests waiting to be processed.", waiting)
    # vLLM 0.32 also splits the waiting requests by reason, under a name that starts the same.
    out.append("# HELP vllm:num_requests_waiting_by_reason Number of requests waiting, by reason.")
    out.append("# TYPE vllm:num_requests_waiting_by_reason gauge")
    for reason in ("capacity", "deferred"):
        labels = _labels({**base, "reason": reason})
        value = float(waiting) if reason == "capacity" else 0.0
        out.append(f"vllm:num_requests_waiting_by_reason{labels} {value!r}")
    metric(
        "kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        sched.kv_usage(),
    )
    counter(
        "prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        sched.prefix_queries_total,
    )
    counter(
        "prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        sched.prefix_hits_total,
    )
    counter("num_preemptions", "Cumulative number of preemption from the engine.", 0)
    counter("prompt_tokens", "Number of prefill tokens processed.", sched.prompt_tokens_total)
    counter(
        "generation_tokens", "Number of generation tokens processed.", sched.generation_tokens_total
    )
    histogram(
        "time_to_first_token_seconds", "Histogram of time to first token in seconds.", sched.ttft
    )
    histogram(
        "inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", sched.itl
    )
    histogram(
        "e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", sched.e2e
    )
    out.append("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig")
    out.append("# TYPE vllm:cache_config_info gauge")
    info = {**{k: cache_info[k] for k in sorted(cache_info)}, **base}
    out.append(f"vllm:cache_config_info{_labels(dict(sorted(info.items())))} 1.0")
    return "\n".join(out) + "\n"
