"""vLLM log lines: the real 0.32 startup capture plus lines written from documented formats."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from vramtop.core.model import StartupFacts, StatsLine
from vramtop.core.vllm.log import (
    StartupParser,
    detect_phase,
    parse_startup,
    parse_stats_line,
    strip_prefix,
)

_ROOT = Path(__file__).resolve().parents[2]
_CANDIDATES = (
    _ROOT / "tests" / "fixtures" / "vllm-0.32-cpu",
    _ROOT.parent / "shared" / "fixtures" / "vllm-0.32-cpu",
)


@pytest.fixture(scope="module")
def startup_lines() -> list[str]:
    for folder in _CANDIDATES:
        if (folder / "startup.log").is_file():
            return (folder / "startup.log").read_text().splitlines()
    pytest.skip("captured vLLM startup.log not found")


# A GPU start as 0.28+ prints it (numbers from the documented formats).
GPU_START = [
    "(APIServer pid=1) INFO 11-29 16:46:47 [api_utils.py:347]  ▄▄ ▄█ █     █     █ ▀▄▀ █  "
    "version 0.33.1",
    "(Worker_TP0 pid=257) INFO 09-09 20:20:01 [gpu_model_runner.py:2602] Starting to load model "
    "/models/qwen...",
    "(Worker_TP0 pid=257) INFO 09-09 20:21:01 [gpu_model_runner.py:2650] Model loading took "
    "18.85 GiB memory and 41.2 seconds",
    "(Worker_TP0 pid=257) INFO 09-09 20:24:26 [gpu_worker.py:681] Available KV cache memory: "
    "9.26 GiB",
    "(Worker_TP0 pid=257) INFO 09-09 20:24:26 [gpu_worker.py:696] CUDA graph memory profiling "
    "is enabled (default since v0.21.0). The current --gpu-memory-utilization=0.9300 is "
    "equivalent to --gpu-memory-utilization=0.9010 without CUDA graph memory profiling. To "
    "maintain the same effective KV cache size as before, increase --gpu-memory-utilization "
    "to 0.9590. To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.",
    "(EngineCore_DP0 pid=184) INFO 09-09 20:24:26 [kv_cache_utils.py:2312] GPU KV cache size: "
    "120,832 tokens, Maximum concurrency for 163,840 tokens per request: 0.74x",
    "(EngineCore_DP0 pid=184) INFO 09-09 20:24:30 [gpu_model_runner.py:3118] Graph capturing "
    "finished in 5 secs, took 0.67 GiB",
    "(Worker_TP0 pid=257) INFO 09-09 20:24:31 [gpu_worker.py:790] Free memory on device "
    "(30.51/31.84 GiB) on startup. Desired GPU memory utilization is (0.93, 29.61 GiB). Actual "
    "usage is 19.12 GiB for consumed memory (weights + non-torch), 0.91 GiB for peak "
    "activation, and 0.32 GiB for CUDAGraph memory. Replace gpu_memory_utilization config "
    "with `--kv-cache-memory=9942461030` (9.26 GiB) to fit into requested memory. Current kv "
    "cache memory in use is 9.26 GiB.",
    "(APIServer pid=1) INFO 09-09 20:24:40 [api_server.py:1900] Starting vLLM API server 0 on "
    "http://0.0.0.0:8000",
    "INFO:     Application startup complete.",
]


def test_real_cpu_startup(startup_lines: list[str]) -> None:
    facts = parse_startup(startup_lines)
    assert facts.version == "0.32.0"
    assert facts.device_kind == "CPU"
    assert facts.kv_cache_tokens == 1_048_576
    assert facts.max_concurrency == 2048.0
    assert facts.max_concurrency_len == 512
    assert facts.listen == "http://127.0.0.1:8011"
    assert facts.error is None and facts.error_kind is None
    # The CPU build prints neither the loading summary nor the memory profile.
    assert facts.weights_gib is None
    assert facts.consumed_gib is None


def test_real_cpu_startup_phases_in_order(startup_lines: list[str]) -> None:
    phases = [p for line in startup_lines if (p := detect_phase(line))]
    firsts = list(dict.fromkeys(phases))
    assert firsts == ["loading weights", "profiling", "ready"]


def test_gpu_start_every_fact() -> None:
    facts = parse_startup(GPU_START)
    assert facts == StartupFacts(
        version="0.33.1",
        device_kind="GPU",
        weights_gib=18.85,
        load_seconds=41.2,
        available_kv_gib=9.26,
        kv_cache_tokens=120_832,
        max_concurrency=0.74,
        max_concurrency_len=163_840,
        startup_free_gib=30.51,
        startup_total_gib=31.84,
        requested_budget=0.93,
        requested_gib=29.61,
        consumed_gib=19.12,
        activation_gib=0.91,
        cudagraph_gib=0.32,
        cudagraph_equivalent_util=(0.93, 0.901),
        listen="http://0.0.0.0:8000",
    )


def test_incremental_feed_matches_batch() -> None:
    parser = StartupParser()
    seen = []
    for line in GPU_START:
        parser.feed(line)
        seen.append(parser.facts.kv_cache_tokens)
    assert parser.facts == parse_startup(GPU_START)
    assert seen[0] is None and seen[-1] == 120_832


def test_two_line_kv_size_and_older_loading_wording() -> None:
    facts = parse_startup(
        [
            "INFO 05-03 17:14:33 [kv_cache_utils.py:1711] GPU KV cache size: 2158880 tokens",
            "INFO 05-03 17:14:33 [kv_cache_utils.py:1716] Maximum concurrency for 65,536 tokens "
            "per request: 108.50x",
            "INFO 05-03 17:10:00 [gpu_model_runner.py:1] Model loading took 15.0 GiB and "
            "5.420225 seconds",
            "INFO 10-02 10:00:00 [api_server.py:1] vLLM API server version 0.6.3.post1",
        ]
    )
    assert facts.kv_cache_tokens == 2_158_880
    assert facts.max_concurrency == 108.5
    assert facts.max_concurrency_len == 65_536
    assert facts.weights_gib == 15.0
    assert facts.load_seconds == pytest.approx(5.420225)
    assert facts.version == "0.6.3.post1"


def test_summary_with_separate_weight_and_non_torch_terms() -> None:
    line = (
        "(Worker_TP2_EP2 pid=4155526) INFO 08-20 17:28:08 [gpu_worker.py:857] Free memory on "
        "device (181.84/184.31 GiB) on startup. Desired GPU memory utilization is (0.92, 169.56 "
        "GiB). Actual usage is 106.69 GiB for weight, 6.31 GiB for peak activation, 0.95 GiB "
        "for non-torch memory, and 4.13 GiB for CUDAGraph memory."
    )
    facts = parse_startup([line])
    assert facts.consumed_gib == pytest.approx(107.64)
    assert facts.activation_gib == 6.31
    assert facts.cudagraph_gib == 4.13
    assert facts.requested_budget == 0.92
    assert facts.startup_total_gib == 184.31


def test_tensor_parallel_repeats_keep_the_first() -> None:
    facts = parse_startup(
        [
            "(Worker_TP0 pid=1) INFO 01-01 00:00:00 [w.py:1] Available KV cache memory: 9.26 GiB",
            "(Worker_TP1 pid=2) INFO 01-01 00:00:00 [w.py:1] Available KV cache memory: 9.11 GiB",
        ]
    )
    assert facts.available_kv_gib == 9.26


def test_negative_available_kv_is_read() -> None:
    facts = parse_startup(
        ["INFO 07-01 04:24:37 [gpu_worker.py:480] Available KV cache memory: -14.28 GiB"]
    )
    assert facts.available_kv_gib == -14.28


@pytest.mark.parametrize(
    ("line", "kind", "needle"),
    [
        (
            "(EngineCore pid=253) ValueError: Free memory on device cuda:0 (30.12/31.84 GiB) on "
            "startup is less than desired GPU memory utilization (0.95, 30.25 GiB). Decrease GPU "
            "memory utilization or reduce GPU memory used by other processes.",
            "out_of_memory",
            "Free memory on device cuda:0",
        ),
        (
            "ValueError: Free memory on device (61.05/119.7 GiB) on startup is less than desired "
            "GPU memory utilization (0.52, 62.24 GiB).",
            "out_of_memory",
            "61.05/119.7",
        ),
        (
            "(EngineCore pid=9) ERROR 01-01 00:00:00 [core.py:1] torch.OutOfMemoryError: CUDA out "
            "of memory. Tried to allocate 2.00 GiB.",
            "out_of_memory",
            "CUDA out of memory",
        ),
        (
            "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause "
            "above. Failed core proc(s): {}",
            "engine_dead",
            "Engine core initialization failed",
        ),
        (
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
            "engine_dead",
            "EngineCore encountered an issue",
        ),
        (
            "(APIServer pid=1) ValueError: The model's max seq len (163840) is larger than the "
            "maximum number of tokens that can be stored in KV cache (120832).",
            "other",
            "max seq len",
        ),
    ],
)
def test_startup_failures(line: str, kind: str, needle: str) -> None:
    facts = parse_startup([line])
    assert facts.error_kind == kind
    assert facts.error is not None and needle in facts.error
    assert not facts.error.startswith(("ValueError", "RuntimeError", "torch."))
    assert detect_phase(line) == "failed"


def test_oom_refusal_also_records_free_and_requested_memory() -> None:
    facts = parse_startup(
        [
            "ValueError: Free memory on device cuda:0 (30.12/31.84 GiB) on startup is less than "
            "desired GPU memory utilization (0.95, 30.25 GiB)."
        ]
    )
    assert (facts.startup_free_gib, facts.startup_total_gib) == (30.12, 31.84)
    assert (facts.requested_budget, facts.requested_gib) == (0.95, 30.25)
    assert facts.consumed_gib is None


def test_first_recognised_error_wins() -> None:
    facts = parse_startup(
        [
            "(EngineCore pid=2) ERROR 01-01 00:00:00 [core.py:1] ValueError: Free memory on device "
            "(1.00/31.84 GiB) on startup is less than desired GPU memory utilization (0.9, 28.6 "
            "GiB).",
            "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause.",
        ]
    )
    assert facts.error_kind == "out_of_memory"


def test_warning_tracebacks_are_not_failures() -> None:
    line = "(EngineCore pid=1) WARNING 08-22 20:20:14 [import_utils.py:408] RuntimeError: no kernel"
    assert parse_startup([line]).error is None
    assert detect_phase(line) is None


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "(APIServer pid=14997) INFO 11-29 16:46:47 [api_utils.py:286] non-default args: {}",
            "non-default args: {}",
        ),
        (
            "(EngineCore_DP0 pid=3021) INFO 09-23 18:12:34 [kv.py:864] GPU KV cache size: 1 tokens",
            "GPU KV cache size: 1 tokens",
        ),
        ("(Worker_TP0 pid=257) WARNING 09-09 20:24:26 [w.py:1] hello", "hello"),
        ("(Worker pid=15093) INFO 11-29 16:47:05 [base_loader.py:82] took", "took"),
        ("(VllmWorker-0 pid=15093) WARNING 11-29 16:47:05 [vllm.py:725] x", "x"),
        ("2026-05-01 21:17:44.614 | (EngineCore pid=187) INFO 05-01 19:17:44 [a.py:1] msg", "msg"),
        ("INFO:     Application startup complete.", "Application startup complete."),
        ("INFO 11-29 16:46:47 [api_server.py:1] no process tag\n", "no process tag"),
        ("plain text stays", "plain text stays"),
        ("", ""),
    ],
)
def test_strip_prefix(line: str, expected: str) -> None:
    assert strip_prefix(line) == expected


def test_stats_line_v1() -> None:
    line = (
        "(APIServer pid=1) INFO 11-29 16:50:00 [loggers.py:257] Engine 000: Avg prompt "
        "throughput: 12.3 tokens/s, Avg generation throughput: 77.0 tokens/s, Running: 1 reqs, "
        "Waiting: 0 reqs, GPU KV cache usage: 1.7%, Prefix cache hit rate: 52.1%"
    )
    assert parse_stats_line(line) == StatsLine(
        engine="000",
        prompt_tps=12.3,
        generation_tps=77.0,
        running=1,
        waiting=0,
        kv_cache_usage=pytest.approx(0.017),
        preemptions=None,
        prefix_cache_hit_rate=pytest.approx(0.521),
    )


def test_stats_line_with_preemptions_and_external_hit_rate() -> None:
    line = (
        "Engine 001: Avg prompt throughput: 3021.4 tokens/s, Avg generation throughput: 512.7 "
        "tokens/s, Running: 64 reqs, Waiting: 12 reqs, Preemptions: 3, GPU KV cache usage: "
        "97.2%, Prefix cache hit rate: 41.3%, External prefix cache hit rate: 5.0%"
    )
    stats = parse_stats_line(line)
    assert stats is not None
    assert stats.engine == "001"
    assert stats.preemptions == 3
    assert stats.waiting == 12
    assert stats.kv_cache_usage == pytest.approx(0.972)
    assert stats.prefix_cache_hit_rate == pytest.approx(0.413)


def test_stats_line_v0_with_swapped_pending_and_cpu_usage() -> None:
    line = (
        "INFO 06-01 12:00:00 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 35.2 tokens/s, Running: 2 reqs, Swapped: 1 reqs, Pending: 4 reqs, GPU KV "
        "cache usage: 50.5%, CPU KV cache usage: 3.0%."
    )
    stats = parse_stats_line(line)
    assert stats is not None
    assert stats.engine is None
    assert (stats.running, stats.waiting) == (2, 4)
    assert stats.kv_cache_usage == pytest.approx(0.505)
    assert stats.prefix_cache_hit_rate is None


@pytest.mark.parametrize(
    "line",
    [
        "",
        "Engine 000: Avg prompt throughput: lots tokens/s",
        "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s",
        "Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
        "Running: many reqs, Waiting: 0 reqs",
        "(APIServer pid=1) INFO 11-29 16:47:17 [entry.py:140] Starting vLLM server on http://x",
    ],
)
def test_other_or_damaged_lines_are_not_stats(line: str) -> None:
    assert parse_stats_line(line) is None


@pytest.mark.parametrize(
    ("line", "phase"),
    [
        (
            "(Worker pid=1) INFO 01-01 00:00:00 [r.py:1] Starting to load model /m...",
            "loading weights",
        ),
        ("Loading safetensors checkpoint shards:  50% Completed | 1/2", "loading weights"),
        (
            "INFO 01-01 00:00:00 [r.py:1] Model loading took 18.85 GiB memory and 41.2 seconds",
            "profiling",
        ),
        ("INFO 01-01 00:00:00 [m.py:1] Profiling CUDA graph memory: PIECEWISE=51", "profiling"),
        (
            "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|█| 67/67",
            "capturing graphs",
        ),
        (
            "INFO 01-01 00:00:00 [r.py:1] Graph capturing finished in 5 secs, took 0.67 GiB",
            "capturing graphs",
        ),
        (
            "(APIServer pid=1) INFO 01-01 00:00:00 [e.py:1] Starting vLLM server on http://h:1",
            "ready",
        ),
        ("INFO:     Application startup complete.", "ready"),
        ('INFO:     127.0.0.1:44948 - "GET /health HTTP/1.1" 200 OK', None),
        ("random words", None),
    ],
)
def test_detect_phase(line: str, phase: str | None) -> None:
    assert detect_phase(line) == phase


@settings(max_examples=examples(300), deadline=None)
@given(st.text())
def test_unexpected_text_never_raises(text: str) -> None:
    parser = StartupParser()
    parser.feed(text)
    assert isinstance(parser.facts, StartupFacts)
    assert parse_stats_line(text) is None or isinstance(parse_stats_line(text), StatsLine)
    assert detect_phase(text) in (
        None,
        "loading weights",
        "profiling",
        "capturing graphs",
        "ready",
        "failed",
    )
    assert isinstance(strip_prefix(text), str)


@settings(max_examples=examples(200), deadline=None)
@given(line=st.sampled_from(GPU_START), cut=st.integers(min_value=0, max_value=400))
def test_cut_lines_never_raise(line: str, cut: int) -> None:
    # The startup parser skips a line that raises: that it counted none is what says so.
    parser = StartupParser()
    parser.feed(line[:cut])
    assert parser.skipped_lines == 0, parser.last_skipped
    parse_stats_line(line[:cut])
    detect_phase(line[:cut])


def test_the_startup_parser_skips_a_bad_line_counts_it_and_reads_on() -> None:
    # A KV size of 400 digits is too large for an int: that line is skipped, not the log.
    huge = "INFO 05-03 17:14:33 [kv_cache_utils.py:1711] GPU KV cache size: " + "9" * 400
    parser = StartupParser()
    parser.feed(huge + " tokens")
    assert parser.skipped_lines == 1
    assert parser.last_skipped is not None and "OverflowError" in parser.last_skipped
    parser.feed("INFO 05-03 17:14:33 [kv_cache_utils.py:1711] GPU KV cache size: 2,158,880 tokens")
    assert parser.facts.kv_cache_tokens == 2_158_880 and parser.skipped_lines == 1


def test_polled_endpoint_access_lines_are_recognised_as_noise() -> None:
    from vramtop.core.vllm.log import is_poll_access_line

    assert is_poll_access_line('INFO:     127.0.0.1:54788 - "GET /metrics HTTP/1.1" 200 OK')
    assert is_poll_access_line('INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK')
    # The page of the samples vramtop reads alone (sources/metrics_page.py).
    from vramtop.sources.metrics_page import SHORT_PAGE

    assert is_poll_access_line(f'INFO:     127.0.0.1:1 - "GET {SHORT_PAGE} HTTP/1.1" 200 OK')
    assert not is_poll_access_line(
        'INFO:     127.0.0.1:1 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
    )
    assert not is_poll_access_line("(APIServer pid=1) INFO Engine 000: Avg prompt throughput: 1.0")


@given(
    st.lists(
        st.sampled_from(
            [
                "(APIServer pid=1) INFO 12-01 10:25:49 [loggers.py:335] ",
                "Engine 000: ",
                "Avg prompt throughput: ",
                "Avg prompt throughput:",
                "21.0 tokens/s, ",
                "Avg generation throughput: 599.6 tokens/s, ",
                "Running: 3 reqs, ",
                "Waiting: 0 reqs, ",
                "GPU KV cache usage: 0.1%",
                " ",
                "\r",
            ]
        ),
        max_size=10,
    ).map("".join)
)
def test_any_line_reads_as_the_stats_pattern_reads_it(line: str) -> None:
    """Lines without the stats line's fixed text are given up at once: the same answer as
    the patterns give (every line of a server's log is asked)."""
    from vramtop.core.vllm.log import _parse_stats, strip_prefix

    assert parse_stats_line(line) == _parse_stats(strip_prefix(line))
