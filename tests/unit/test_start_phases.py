"""A start's phases read from vLLM's log: the captured CPU build's, a GPU start as vLLM's
source prints it, and odd inputs (no stamps, a new year, lines said twice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtop.core.vllm import start_phases
from vramtop.core.vllm.log import line_time
from vramtop.core.vllm.log_run import last_run
from vramtop.core.vllm.start_phases import StartPhases, parse_start_phases

_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _lines(name: str) -> list[str]:
    return (_FIXTURES / name).read_text().splitlines()


def test_the_captured_cpu_start() -> None:
    phases = parse_start_phases(last_run(_lines("vllm-0.32-cpu/startup.log")))
    # "Checkpoint size: 0.00 GiB" (a tiny model), "Loading weights took 0.01 seconds".
    assert (phases.weights_gib, phases.weights_s) == (0.0, 0.01)
    assert phases.weights_gb_per_s == 0.0
    # No compile total on the CPU build: its warm-up for the compilation, 16:47:06 → 16:47:15,
    # compiled anew ("Compiling model again due to a load failure").
    assert (phases.compile_s, phases.compile_cached) == (9.0, False)
    assert phases.graphs_s is None  # the CPU build captures no graphs
    assert phases.engine_init_s == 10.32
    assert phases.to_ready_s == 30.0  # 16:46:47 → "Starting vLLM server on" at 16:47:17


def test_a_gpu_start_as_vllm_prints_it() -> None:
    phases = parse_start_phases(last_run(_lines("vllm-gpu-written/failed-then-served.log")))
    # The served start only (the failed one before it is another run).
    assert phases == StartPhases(
        weights_gib=18.9,
        weights_s=38.2,
        graphs_s=31.0,
        engine_init_s=49.8,
        to_ready_s=103.0,
    )
    assert phases.weights_gb_per_s == pytest.approx(18.9 * 2**30 / 1e9 / 38.2)
    assert phases.fields()["weights_gb_per_s"] == 0.531


def test_compile_total_and_a_warm_cache() -> None:
    lines = [
        "(Worker pid=7) INFO 12-31 23:59:50 [gpu_model_runner.py:2602] Starting to load model m",
        "(Worker pid=7) INFO 12-31 23:59:55 [gpu_model_runner.py:2653] Model loading took "
        "21.80 GiB memory and 18.02 seconds",
        "(Worker pid=7) INFO 12-31 23:59:56 [backends.py:215] Directly load the compiled graph(s) "
        "for dynamic shape from the cache, took 4.912 s",
        "(Worker pid=7) INFO 12-31 23:59:58 [monitor.py:34] torch.compile takes 5.31 s in total",
        "(Worker pid=8) INFO 12-31 23:59:58 [monitor.py:34] torch.compile takes 7.00 s in total",
        "(APIServer pid=1) INFO 01-01 00:00:10 [api_server.py:1900] Starting vLLM API server 0 on "
        "http://0.0.0.0:8000",
    ]
    phases = parse_start_phases(lines)
    assert (phases.weights_gib, phases.weights_s) == (21.8, 18.02)  # no "Loading weights"
    assert (phases.compile_s, phases.compile_cached) == (5.31, True)  # the first said
    assert phases.to_ready_s == 20.0  # over the new year


def test_a_log_that_says_nothing_gives_nothing() -> None:
    assert parse_start_phases([]) == StartPhases()
    assert parse_start_phases(["Loading weights took soon", "INFO:  startup"]).fields() == {}


def test_vllms_words_are_matched_in_one_module() -> None:
    # The start's figures use log.py's patterns (one place to follow vLLM's wording).
    source = Path(start_phases.__file__).read_text()
    assert "re.compile" not in source
    assert start_phases.vllm_log.MODEL_LOADING.search("Model loading took 1.5 GiB and 2 s")


@pytest.mark.parametrize(
    ("line", "seconds"),
    [
        ("INFO 01-01 00:00:01 [core.py:1] x", 1.0),
        ("(EngineCore_DP0 pid=12) INFO 01-02 00:00:00.250 [core.py:1] x", 86400.25),
        ("2026-05-01 21:17:44.614 | WARNING 03-01 00:00:00 [a.py:2] x", 60 * 86400.0),
        ("INFO:     127.0.0.1:1 - GET /health", None),
        ("INFO 02-30 00:00:00 [core.py:1] not a day", None),
    ],
)
def test_a_lines_time(line: str, seconds: float | None) -> None:
    assert line_time(line) == seconds
