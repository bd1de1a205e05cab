"""parse_metrics on real captured vLLM text, on older spellings, and on garbage."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from vramtop.core.model import CacheConfig, ServerMetrics
from vramtop.core.vllm.metrics import parse_metrics
from vramtop.core.vllm.prometheus_text import _read_line, read_samples

_ROOT = Path(__file__).resolve().parents[2]
_CANDIDATES = (
    _ROOT / "tests" / "fixtures" / "vllm-0.32-cpu",
    _ROOT.parent / "shared" / "fixtures" / "vllm-0.32-cpu",
)


def _fixture_text(name: str) -> str:
    for folder in _CANDIDATES:
        if (folder / name).is_file():
            return (folder / name).read_text()
    pytest.skip(f"captured vLLM fixture {name} not found")


@pytest.fixture(scope="module")
def page() -> str:
    return _fixture_text("metrics.txt")


def test_real_page_values(page: str) -> None:
    m = parse_metrics(page)
    assert m.generation_tokens_total == 903.0
    assert m.prompt_tokens_total == 17.0
    assert m.prefix_cache_queries_total == 17.0
    assert m.prefix_cache_hits_total == 0.0
    assert m.preemptions_total == 0.0
    assert m.requests_running == 0.0
    assert m.requests_waiting == 0.0
    assert m.kv_cache_usage == 0.0
    assert m.model_name == "tiny"
    assert m.cache == CacheConfig(
        block_size=128,
        cache_dtype="auto",
        gpu_memory_utilization=0.85,
        num_gpu_blocks=8192,
        kv_cache_size_tokens=1048576,
        kv_cache_memory_bytes=1073741824,
        kv_cache_max_concurrency=2048.0,
    )


def test_by_reason_and_by_source_series_are_not_added_in(page: str) -> None:
    # vllm:prompt_tokens_by_source_total shares a prefix with prompt_tokens_total.
    series = (
        'vllm:prompt_tokens_by_source_total{engine="0",model_name="tiny",source="local_compute"}'
    )
    bumped = page.replace(f"{series} 17.0", f"{series} 999.0")
    assert bumped != page
    assert parse_metrics(bumped).prompt_tokens_total == 17.0


OLD_PAGE = """\
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="llama"} 0.25
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="llama"} 3.0
vllm:num_requests_waiting{model_name="llama"} 1.0
vllm:num_preemptions{model_name="llama"} 4.0
vllm:prompt_tokens{model_name="llama"} 1200.0
vllm:generation_tokens{model_name="llama"} 800.0
vllm:cache_config_info{block_size="16",cache_dtype="fp8",\
gpu_memory_utilization="0.9",num_gpu_blocks="None"} 1.0
"""


def test_older_names_without_total_and_gpu_cache_usage() -> None:
    m = parse_metrics(OLD_PAGE)
    assert m.kv_cache_usage == 0.25
    assert m.requests_running == 3.0
    assert m.requests_waiting == 1.0
    assert m.preemptions_total == 4.0
    assert m.prompt_tokens_total == 1200.0
    assert m.generation_tokens_total == 800.0
    assert m.model_name == "llama"
    assert m.cache.block_size == 16
    assert m.cache.cache_dtype == "fp8"
    assert m.cache.gpu_memory_utilization == 0.9
    assert m.cache.num_gpu_blocks is None  # "None" in a label means unknown
    assert m.cache.kv_cache_size_tokens is None  # label absent in older versions


def test_counter_typed_without_total_suffix() -> None:
    # Typed as a counter but exposed without `_total`: the library keeps the sample name.
    text = '# TYPE vllm:generation_tokens counter\nvllm:generation_tokens{engine="0"} 5.0\n'
    assert parse_metrics(text).generation_tokens_total == 5.0


def test_new_name_wins_over_old_when_both_present() -> None:
    text = "vllm:kv_cache_usage_perc 0.5\nvllm:gpu_cache_usage_perc 0.9\n"
    assert parse_metrics(text).kv_cache_usage == 0.5


def test_engines_summed_and_kv_usage_averaged() -> None:
    text = """\
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="m"} 100.0
vllm:generation_tokens_total{engine="1",model_name="m"} 50.0
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.4
"""
    m = parse_metrics(text)
    assert m.generation_tokens_total == 150.0
    assert m.requests_running == 3.0
    assert m.kv_cache_usage == pytest.approx(0.3)


def test_cache_config_numbers_parsed_defensively() -> None:
    text = (
        'vllm:cache_config_info{block_size="abc",gpu_memory_utilization="nan",'
        'kv_cache_memory_bytes="1.5e9",kv_cache_max_concurrency="",cache_dtype="None"} 1.0\n'
    )
    c = parse_metrics(text).cache
    assert c.block_size is None
    assert c.gpu_memory_utilization is None
    assert c.kv_cache_memory_bytes == 1_500_000_000
    assert c.kv_cache_max_concurrency is None
    assert c.cache_dtype is None


def test_a_broken_line_costs_only_itself(page: str) -> None:
    half = len(page) // 2
    cut = page.index("\n", half) + 1
    broken = page[:cut] + 'vllm:oops{engine="0" 1.0\n' + page[cut:]
    assert parse_metrics(broken) == parse_metrics(page)  # a metric not read: not even parsed
    # One vramtop reads, damaged (a label's quote never closed): skipped, and counted.
    broken = page[:cut] + 'vllm:num_requests_running{engine="0 1.0\n' + page[cut:]
    read = parse_metrics(broken)
    assert parse_metrics(page).skipped_lines == 0
    assert read.skipped_lines == 1  # counted, for the scraper to log
    assert replace(read, skipped_lines=0) == parse_metrics(page)


def test_a_changed_cache_config_line_is_read_anew(page: str) -> None:
    # The line's parse is memoised by its text: a restarted server with other numbers (and
    # a page with the same numbers again) must never be answered from an older parse.
    fewer = page.replace('num_gpu_blocks="8192"', 'num_gpu_blocks="4096"')
    assert fewer != page
    assert parse_metrics(page).cache.num_gpu_blocks == 8192
    assert parse_metrics(fewer).cache.num_gpu_blocks == 4096
    assert parse_metrics(page).cache.num_gpu_blocks == 8192
    broken = page.replace('num_gpu_blocks="8192"', 'num_gpu_blocks="8192')
    assert parse_metrics(broken).cache == CacheConfig()
    assert parse_metrics(broken).generation_tokens_total == 903.0
    assert parse_metrics(broken).skipped_lines == 1


def test_truncated_page_keeps_what_came_before(page: str) -> None:
    head = page[: page.index("vllm:cache_config_info")]
    m = parse_metrics(head + "vllm:cache_config_info{block_si")
    assert m.generation_tokens_total == 903.0
    assert m.cache == CacheConfig()


def test_empty_and_non_metric_text() -> None:
    assert parse_metrics("") == ServerMetrics()
    assert parse_metrics("<html>502 Bad Gateway</html>") == ServerMetrics()


def test_non_finite_values_are_unknown() -> None:
    assert parse_metrics("vllm:kv_cache_usage_perc NaN\n").kv_cache_usage is None


@settings(max_examples=examples(200), deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises(text: str) -> None:
    assert isinstance(parse_metrics(text), ServerMetrics)


@settings(max_examples=examples(100), deadline=None)
@given(data=st.data())
def test_truncations_and_mutations_of_the_real_page_never_raise(
    page: str, data: st.DataObject
) -> None:
    cut = data.draw(st.integers(min_value=0, max_value=len(page)))
    text = page[:cut]
    if text:
        at = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
        junk = data.draw(st.text(max_size=8))
        text = text[:at] + junk + text[at + 1 :]
    assert isinstance(parse_metrics(text), ServerMetrics)


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    # NaN is not equal to itself: compare NaN values by position.
    return repr(a) == repr(b)


def test_every_real_sample_line_reads_as_the_library_reads_it(page: str) -> None:
    lines = [line for line in page.splitlines() if line and not line.startswith("#")]
    assert len(lines) > 100
    for line in lines:
        assert _same(read_samples(line), _read_line(line)), line


_SERIES = st.sampled_from(
    [
        "vllm:num_requests_running",
        'vllm:num_requests_running{engine="0",model_name="qwen"}',
        'vllm:generation_tokens_total{model_name="a}b",engine="0"}',  # a brace in a value
        'vllm:prompt_tokens_total{model_name="say \\"hi\\"\\n"}',  # escapes
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"}',
    ]
)
_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.sampled_from(["NaN", "+Inf", "-Inf", "1e3", "1_000", "x", "", "0x10", "1.5e-7"]),
)


@settings(max_examples=examples(300), deadline=None)
@given(series=_SERIES, value=_VALUES, timestamp=st.sampled_from(["", " 1700000000000", " 5 6"]))
def test_a_known_series_with_any_value_reads_as_the_library_reads_it(
    series: str, value: str, timestamp: str
) -> None:
    # The series is read once and kept; the value is read each time: both ways must agree.
    line = f"{series} {value}{timestamp}"
    assert _same(read_samples(line), _read_line(line)), line


_LABEL_NAMES = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True)


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@settings(max_examples=examples(300), deadline=None)
@given(
    labels=st.lists(st.tuples(_LABEL_NAMES, st.text(max_size=12)), max_size=4), comma=st.booleans()
)
def test_a_plain_series_reads_as_the_library_reads_it(
    labels: list[tuple[str, str]], comma: bool
) -> None:
    """vLLM's series are read without the library (its import costs more than a one-shot
    answer's parse): any label values, escaped as the format says, read the same."""
    body = ",".join(f'{name}="{_escaped(value)}"' for name, value in labels)
    series = f"vllm:prompt_tokens_total{{{body}{',' if comma and body else ''}}}"
    line = f"{series} 7"
    assert _same(read_samples(line), _read_line(line)), line


@settings(max_examples=examples(300), deadline=None)
@given(
    series=st.text(alphabet=st.sampled_from(list('vlm:_ab{}=",\\n xé0')), min_size=1, max_size=30)
)
def test_any_series_text_reads_as_the_library_reads_it(series: str) -> None:
    line = f"{series} 7"
    assert _same(read_samples(line), _read_line(line)), line


def _wanted_one_by_one(text: str) -> list[str]:
    """The lines the parser reads, found as they were: every line split off and tested."""
    from vramtop.core.vllm import metrics

    return [
        line
        for line in text.splitlines()
        if line.startswith(metrics._LINE_PREFIXES) and metrics._name(line) in metrics._WANTED_NAMES
    ]


def test_the_lines_read_are_found_in_one_search_of_the_page(page: str) -> None:
    from vramtop.core.vllm.metrics import wanted_lines

    assert wanted_lines(page) == _wanted_one_by_one(page)
    assert len(wanted_lines(page)) >= 10


_PAGE_PARTS = st.sampled_from(
    [
        "vllm:prompt_tokens_total",
        "vllm:prompt_tokens",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting_by_reason",
        "vllm:cache_config_info",
        "vllm:inter_token_latency_seconds_sum",
        "# HELP vllm:prompt_tokens_total x",
        '{engine="0"}',
        " 3.0",
        "\t",
        "x",
        "_total",
        "\n",
        "\r\n",
        "\r",
        "\x85",
        "",
    ]
)


@given(st.lists(_PAGE_PARTS, max_size=16).map("".join))
def test_any_page_gives_the_lines_a_line_by_line_test_gives(text: str) -> None:
    from vramtop.core.vllm.metrics import wanted_lines

    assert wanted_lines(text) == _wanted_one_by_one(text)


def _registry_like_vllms() -> object:
    """A prometheus_client registry with vLLM's kinds of metrics (a counter, gauges, a
    histogram, an info gauge), and others beside them that vramtop does not read."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    registry = CollectorRegistry()
    labels = ("engine", "model_name")
    for name in ("vllm:prompt_tokens", "vllm:generation_tokens", "vllm:prompt_tokens_by_source"):
        Counter(name, "x", labels, registry=registry).labels("0", "tiny").inc(17)
    Gauge("vllm:num_requests_running", "x", labels, registry=registry).labels("0", "tiny").set(3)
    Gauge("vllm:kv_cache_usage_perc", "x", labels, registry=registry).labels("0", "tiny").set(0.25)
    latency = Histogram("vllm:inter_token_latency_seconds", "x", labels, registry=registry)
    latency.labels("0", "tiny").observe(0.02)
    Histogram("vllm:e2e_request_latency_seconds", "x", labels, registry=registry).labels(
        "0", "tiny"
    ).observe(1.5)
    Gauge("vllm:cache_config_info", "x", ("block_size",), registry=registry).labels("16").set(1)
    return registry


def test_a_page_of_the_sample_names_read_gives_every_figure_the_whole_page_gives() -> None:
    """What a server is asked for (`SAMPLE_NAMES`, prometheus_client's `?name[]=`) is all
    the parser reads, as the library itself restricts a page to the names asked."""
    from prometheus_client import generate_latest

    from vramtop.core.vllm.metrics import SAMPLE_NAMES, only_read, series_read

    registry: Any = _registry_like_vllms()
    whole = generate_latest(registry).decode()
    short = generate_latest(registry.restricted_registry(SAMPLE_NAMES)).decode()
    assert len(short) < len(whole) / 2
    assert parse_metrics(short) == parse_metrics(whole)
    assert parse_metrics(short).inter_token_latency_count == 1
    assert series_read(short) == series_read(whole) and len(series_read(whole)) == 7
    assert only_read(short) and not only_read(whole)


def test_the_real_page_cut_to_the_sample_names_read_reads_the_same(page: str) -> None:
    from vramtop.core.vllm.metrics import SAMPLE_NAMES, only_read, series_read

    names = set(SAMPLE_NAMES)
    short = "".join(
        line + "\n"
        for line in page.splitlines()
        if line and not line.startswith("#") and _name_of(line) in names
    )
    assert parse_metrics(short) == parse_metrics(page)
    assert series_read(short) == series_read(page)
    assert only_read(short) and not only_read(page)


def test_series_read_tell_pages_apart_by_their_series_not_their_values() -> None:
    from vramtop.core.vllm.metrics import series_read

    one = 'vllm:num_requests_running{engine="0"} 1.0\nvllm:prompt_tokens_total 5 1700000000\n'
    later = 'vllm:num_requests_running{engine="0"} 3.0\nvllm:prompt_tokens_total 9\n'
    engines = one + 'vllm:num_requests_running{engine="1"} 1.0\n'
    assert series_read(one) == series_read(later)
    assert series_read(engines) > series_read(one)
    assert series_read("# HELP vllm:num_requests_running x\n") == frozenset()


def _name_of(line: str) -> str:
    return line.split("{", 1)[0].split(" ", 1)[0]


def test_series_text_that_holds_a_value_of_its_own_reads_as_the_library_reads_it() -> None:
    # Found by the property above: the library reads `: 0 } 7` as the series `:` with value 0.
    line = ": 0 } 7"
    assert read_samples(line) == _read_line(line) == ((":", (), 0),)
