"""A /metrics page is untrusted input: values vLLM cannot report, and series written twice,
are dropped and counted, never read as figures."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from vramtop.core.model import ServerMetrics
from vramtop.core.vllm.metrics import (
    MAX_COUNT,
    MAX_REQUESTS,
    MAX_SECONDS,
    SAMPLE_NAMES,
    parse_metrics,
)

_INFO = (
    'vllm:cache_config_info{block_size="16",cache_dtype="auto",gpu_memory_utilization="0.9",'
    'num_gpu_blocks="100",kv_cache_size_tokens="1600",kv_cache_memory_bytes="1048576",'
    'kv_cache_max_concurrency="2.0"} 1.0\n'
)


def test_a_series_written_twice_is_read_once_and_counted() -> None:
    line = 'vllm:generation_tokens_total{engine="0",model_name="m"} 50.0\n'
    m = parse_metrics(line + line)
    assert m.generation_tokens_total == 50.0
    assert m.dropped_values == 1


def test_a_repeat_with_its_labels_in_another_order_is_the_same_series() -> None:
    page = (
        'vllm:generation_tokens_total{engine="0",model_name="m"} 50.0\n'
        'vllm:generation_tokens_total{model_name="m",engine="0"} 50.0\n'
    )
    assert parse_metrics(page).generation_tokens_total == 50.0


def test_engines_told_apart_by_their_labels_still_add_up() -> None:
    page = (
        'vllm:generation_tokens_total{engine="0",model_name="m"} 50.0\n'
        'vllm:generation_tokens_total{engine="1",model_name="m"} 50.0\n'
    )
    m = parse_metrics(page)
    assert m.generation_tokens_total == 100.0 and m.dropped_values == 0


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('vllm:kv_cache_usage_perc{engine="0"} -3.0', "kv_cache_usage"),
        ('vllm:kv_cache_usage_perc{engine="0"} 1.5', "kv_cache_usage"),
        ('vllm:num_requests_running{engine="0"} -7.0', "requests_running"),
        ('vllm:num_requests_running{engine="0"} 1.5', "requests_running"),
        ('vllm:num_requests_waiting{engine="0"} 1e308', "requests_waiting"),
        ('vllm:generation_tokens_total{engine="0"} 1e308', "generation_tokens_total"),
        ('vllm:prompt_tokens_total{engine="0"} -1.0', "prompt_tokens_total"),
        ('vllm:num_preemptions_total{engine="0"} 2.5', "preemptions_total"),
        ('vllm:inter_token_latency_seconds_sum{engine="0"} -1.0', "inter_token_latency_sum_s"),
    ],
)
def test_a_value_vllm_cannot_report_is_unknown_and_counted(line: str, field: str) -> None:
    m = parse_metrics(line + "\n")
    assert getattr(m, field) is None
    assert m.dropped_values == 1


def test_one_engines_absurd_value_makes_the_sum_unknown_not_smaller() -> None:
    page = 'vllm:num_requests_running{engine="0"} 3.0\nvllm:num_requests_running{engine="1"} -7.0\n'
    assert parse_metrics(page).requests_running is None


def test_the_histogram_pair_is_unknown_when_its_count_is_absurd() -> None:
    page = (
        'vllm:inter_token_latency_seconds_sum{engine="0"} 2.0\n'
        'vllm:inter_token_latency_seconds_count{engine="0"} -5.0\n'
    )
    m = parse_metrics(page)
    assert m.inter_token_latency_sum_s is None and m.inter_token_latency_count is None


@pytest.mark.parametrize(
    ("label", "value", "field"),
    [
        ("gpu_memory_utilization", "0", "gpu_memory_utilization"),
        ("gpu_memory_utilization", "-0.5", "gpu_memory_utilization"),
        ("gpu_memory_utilization", "1e308", "gpu_memory_utilization"),
        ("block_size", "-16", "block_size"),
        ("block_size", "16.5", "block_size"),
        ("num_gpu_blocks", "1e308", "num_gpu_blocks"),
        ("kv_cache_memory_bytes", "1e308", "kv_cache_memory_bytes"),
        ("kv_cache_size_tokens", "-1", "kv_cache_size_tokens"),
        ("kv_cache_max_concurrency", "-2", "kv_cache_max_concurrency"),
    ],
)
def test_a_cache_config_label_vllm_cannot_report_is_unknown(
    label: str, value: str, field: str
) -> None:
    start = _INFO.index(f'{label}="') + len(label) + 2
    end = _INFO.index('"', start)
    m = parse_metrics(_INFO[:start] + value + _INFO[end:])
    assert getattr(m.cache, field) is None
    assert m.dropped_values == 1
    # The other labels are still read.
    assert m.cache.cache_dtype == "auto"


def test_the_plausible_cache_config_is_read_whole() -> None:
    m = parse_metrics(_INFO)
    assert m.dropped_values == 0
    assert m.cache.gpu_memory_utilization == 0.9 and m.cache.num_gpu_blocks == 100


def test_a_model_name_with_control_characters_is_not_shown() -> None:
    page = 'vllm:num_requests_running{model_name="m\\u001b[2J"} 1.0\n'.replace("\\u001b", "\x1b")
    assert parse_metrics(page).model_name is None


# --- property: whatever the page, nothing escapes and nothing absurd is read -------------

_NAMES = [name for name in SAMPLE_NAMES if not name.endswith("cache_config_info")] + [
    "vllm:generation_tokens",
    "vllm:num_requests_running_total",
]
_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.sampled_from(["NaN", "+Inf", "-Inf", "1e308", "-0", "0x10", "", "1_0", "abc"]),
)
_LABELS = st.dictionaries(
    st.sampled_from(["engine", "model_name", "le", "x"]),
    st.text(max_size=6),
    max_size=3,
)


def _line(name: str, labels: dict[str, str], value: object) -> str:
    body = ",".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in labels.items()
    )
    return f"{name}{{{body}}} {value}" if labels else f"{name} {value}"


_LINES = st.builds(_line, st.sampled_from(_NAMES), _LABELS, _VALUES)
_INFO_LINES = st.builds(
    lambda values: (
        "vllm:cache_config_info{" + ",".join(f'{k}="{v}"' for k, v in values.items()) + "} 1.0"
    ),
    st.dictionaries(
        st.sampled_from(
            [
                "block_size",
                "gpu_memory_utilization",
                "num_gpu_blocks",
                "kv_cache_size_tokens",
                "kv_cache_memory_bytes",
                "kv_cache_max_concurrency",
            ]
        ),
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True).map(str),
            st.integers(min_value=-(10**20), max_value=10**20).map(str),
            st.sampled_from(["None", "", "1,000", "abc"]),
        ),
    ),
)


def _whole_in(value: float | None, most: float) -> bool:
    return value is None or (0 <= value <= most and value == int(value))


def _in_bounds(m: ServerMetrics) -> bool:
    engines = 64  # lines per name on a generated page, at most: the sums stay bounded
    counts = (
        m.generation_tokens_total,
        m.prompt_tokens_total,
        m.preemptions_total,
        m.prefix_cache_queries_total,
        m.prefix_cache_hits_total,
        m.inter_token_latency_count,
        m.first_token_count,
    )
    cache = m.cache
    return (
        all(_whole_in(v, MAX_COUNT * engines) for v in counts)
        and _whole_in(m.requests_running, MAX_REQUESTS * engines)
        and _whole_in(m.requests_waiting, MAX_REQUESTS * engines)
        and (m.kv_cache_usage is None or 0 <= m.kv_cache_usage <= 1)
        and (
            m.inter_token_latency_sum_s is None
            or 0 <= m.inter_token_latency_sum_s <= MAX_SECONDS * engines
        )
        and (cache.gpu_memory_utilization is None or 0 < cache.gpu_memory_utilization <= 1)
        and (cache.block_size is None or cache.block_size >= 1)
        and all(
            v is None or v >= 0
            for v in (cache.num_gpu_blocks, cache.kv_cache_size_tokens, cache.kv_cache_memory_bytes)
        )
        and (
            cache.kv_cache_max_concurrency is None
            or (
                math.isfinite(cache.kv_cache_max_concurrency)
                and cache.kv_cache_max_concurrency >= 0
            )
        )
    )


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.one_of(_LINES, _INFO_LINES), max_size=40))
def test_no_page_raises_and_no_absurd_value_reaches_the_sample(lines: list[str]) -> None:
    page = "\n".join(lines) + "\n"
    m = parse_metrics(page)
    assert _in_bounds(m), m


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_LINES, min_size=1, max_size=10))
def test_the_same_page_twice_reads_as_the_page_once(lines: list[str]) -> None:
    page = "\n".join(lines) + "\n"
    once, twice = parse_metrics(page), parse_metrics(page + page)
    assert twice.generation_tokens_total == once.generation_tokens_total
    assert twice.requests_running == once.requests_running
    assert twice.kv_cache_usage == once.kv_cache_usage


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=400))
def test_any_text_parses_without_raising(text: str) -> None:
    assert _in_bounds(parse_metrics("vllm:" + text))
