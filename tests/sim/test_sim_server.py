"""The fake vLLM server end to end, as real processes on a real simulated GPU."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families

from tests.support import http
from tests.support.waiting import PROCESS_S, stays, wait_until
from vramtop.sim.card import GIB


def wait_for(check: Any, timeout_s: float = PROCESS_S) -> Any:
    return wait_until(check, deadline_s=timeout_s, what="the check (see the line above)")


def engine_of(server: Any) -> psutil.Process:
    children = psutil.Process(server.proc.pid).children()
    assert len(children) == 1
    return children[0]


def test_starts_prints_vllm_lines_and_serves(machine: Any, server_factory: Any) -> None:
    s = server_factory(machine, 0.93)
    assert s.wait_ready()
    log = s.text()
    assert re.search(
        r"^\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[.+\.py:\d+\] .*"
        r"version 0\.29\.0",
        log,
        re.M,
    )
    assert re.search(r"\(EngineCore pid=\d+\) INFO .* Available KV cache memory: 9\.26 GiB", log)
    assert "Model loading took 18.9 GiB memory and" in log
    m = re.search(
        r"GPU KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens "
        r"per request: ([\d.]+)x",
        log,
    )
    assert m and m.groups() == ("269,696", "262,144", "1.03")
    assert re.search(r"Desired GPU memory utilization is \(0\.93, 29\.61 GiB\)", log)
    assert f"Starting vLLM server on http://127.0.0.1:{s.port}" in log
    assert "Application startup complete." in log

    assert http.get(s.url + "/health").status_code == 200
    assert http.get(s.url + "/version").json() == {"version": "0.29.0"}
    models = http.get(s.url + "/v1/models").json()["data"]
    assert models[0]["id"] == "qwen3.8-27b-nvfp4" and models[0]["max_model_len"] == 262_144

    families = {
        f.name: f for f in text_string_to_metric_families(http.get(s.url + "/metrics").text)
    }
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
        "vllm:num_preemptions",
        "vllm:prefix_cache_queries",
        "vllm:prefix_cache_hits",
    ):
        assert name in families, name
    info = families["vllm:cache_config_info"].samples[0].labels
    assert info["cache_dtype"] == "fp8" and info["gpu_memory_utilization"] == "0.93"
    assert info["kv_cache_size_tokens"] == "269696" and info["num_gpu_blocks"] == "16856"
    assert info["engine"] == "0" and info["model_name"] == "qwen3.8-27b-nvfp4"

    # The engine holds the budget plus its CUDA context in the ledger, under its own pid.
    engine = engine_of(s)
    held = {p["pid"]: p for p in machine.state()["servers"]}[engine.pid]
    assert held["name"] == "VLLM::EngineCore"
    assert 29.9 * GIB < held["allocated_bytes"] < 30.1 * GIB


def test_streaming_and_plain_completions_produce_tokens(
    machine_factory: Any, server_factory: Any
) -> None:
    m = machine_factory(speed=10.0)
    s = server_factory(m, 0.93)
    assert s.wait_ready()
    body = {
        "model": "qwen3.8-27b-nvfp4",
        "prompt": "def add(a, b):",
        "max_tokens": 30,
        "stream": True,
    }
    chunks, done = [], False
    with http.stream("POST", s.url + "/v1/completions", json=body, timeout=30) as r:
        for line in r.iter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunks.append(line)
    # How many events the 30 tokens come in depends on how the server's steps fall on a busy
    # machine: what is asserted is the stream's shape, its text and its end.
    events = [json.loads(line.removeprefix("data: ")) for line in chunks]
    assert done and events
    assert "".join(e["choices"][0]["text"] for e in events)
    assert [e["choices"][0]["finish_reason"] for e in events][-1] == "length"
    plain = http.post(
        s.url + "/v1/chat/completions",
        timeout=30,
        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 12},
    ).json()
    assert plain["usage"]["completion_tokens"] == 12
    assert plain["choices"][0]["message"]["content"]
    metrics = http.get(s.url + "/metrics").text
    gen = re.search(r"^vllm:generation_tokens_total\{.*\} ([\d.]+)$", metrics, re.M)
    assert gen and float(gen.group(1)) >= 42
    wrong = http.post(s.url + "/v1/completions", json={"model": "other", "prompt": "x"})
    assert wrong.status_code == 404


def test_api_key_protects_v1_only(machine: Any, server_factory: Any) -> None:
    s = server_factory(machine, 0.93, api_key="sekrit")
    assert s.wait_ready()
    assert http.get(s.url + "/v1/models").status_code == 401
    assert http.get(s.url + "/v1/models").json() == {"error": "Unauthorized"}
    ok = http.get(s.url + "/v1/models", headers={"Authorization": "Bearer sekrit"})
    assert ok.status_code == 200
    assert http.get(s.url + "/health").status_code == 200
    assert http.get(s.url + "/metrics").status_code == 200
    # vLLM prints the keys given on its command line (a list) among its non-default args.
    assert "non-default args: {" in s.text() and "'api_key': ['sekrit']" in s.text()


def test_the_key_is_read_from_vllm_api_key_and_not_printed(
    machine: Any, server_factory: Any
) -> None:
    """As vLLM: VLLM_API_KEY is the other place a key is read from (no other variable is)."""
    s = server_factory(machine, 0.93, env={**machine.server_env(), "VLLM_API_KEY": "env-key-9"})
    assert s.wait_ready()
    assert http.get(s.url + "/v1/models").status_code == 401
    ok = http.get(s.url + "/v1/models", headers={"Authorization": "Bearer env-key-9"})
    assert ok.status_code == 200
    assert "env-key-9" not in s.text() and "api_key" not in s.text()


def test_a_budget_that_leaves_no_kv_block_is_refused(machine: Any, server_factory: Any) -> None:
    """As vLLM: not one KV block fits, so the server does not start (no "0 tokens" ready)."""
    s = server_factory(machine, 0.3)
    assert s.proc.wait(timeout=60) != 0
    assert "No available memory for the cache blocks" in s.text()
    assert "Application startup complete" not in s.text()


def test_a_pool_that_cannot_hold_one_request_is_refused_as_vllm_does(
    machine: Any, server_factory: Any
) -> None:
    """vLLM's check_enough_kv_cache_memory: at 0.85 one 262,144-token request does not fit
    (the field report's reason to lower --max-model-len with the budget)."""
    s = server_factory(machine, 0.85, max_model_len=262_144)
    assert s.proc.wait(timeout=60) != 0
    log = s.text()
    m = re.search(
        r"ValueError: To serve at least one request with the model's max seq len \(262144\), "
        r"\((\d+\.\d\d) GiB KV cache is needed, which is larger than the available KV cache "
        r"memory \((\d+\.\d\d) GiB\)\. Based on the available memory, the estimated maximum "
        r"model length is (\d+)\. Try increasing `gpu_memory_utilization` or decreasing "
        r"`max_model_len`",
        log,
    )
    assert m, log[-2000:]
    assert float(m.group(1)) == 9.0 and float(m.group(2)) == 6.71
    assert 163_840 <= int(m.group(3)) < 262_144
    assert "Application startup complete" not in log
    assert wait_for(lambda: not machine.state()["servers"])


def test_max_model_len_auto_fits_the_ceiling_to_the_pool(machine: Any, server_factory: Any) -> None:
    s = server_factory(machine, 0.85, max_model_len="auto")
    assert s.wait_ready()
    log = s.text()
    m = re.search(r"Auto-fit max_model_len: reduced from 262144 to (\d+) to fit in available", log)
    assert m, log[-2000:]
    fitted = int(m.group(1))
    models = http.get(s.url + "/v1/models").json()["data"]
    assert models[0]["max_model_len"] == fitted < 262_144
    assert re.search(rf"Maximum concurrency for {fitted:,} tokens per request: 1\.00x", log)


def test_unknown_flag_is_an_argparse_error(machine: Any) -> None:
    argv = [*machine.server_argv(0.9, port=1), "--no-such-flag"]
    out = subprocess.run(argv, env=machine.server_env(), capture_output=True, text=True, timeout=20)
    assert out.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in out.stderr


def test_leading_serve_and_missing_world_socket(machine: Any) -> None:
    argv = [sys.executable, "-m", "vramtop.sim.server", "serve", "m", "--port", "1"]
    env = {k: v for k, v in machine.server_env().items() if k != "VRAMTOP_SIM_SOCKET"}
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=20)
    assert out.returncode == 2 and "VRAMTOP_SIM_SOCKET is not set" in out.stderr
    env["VRAMTOP_SIM_SOCKET"] = "/nonexistent/gpu.sock"
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=20)
    assert out.returncode == 1 and "simulated GPU not reachable" in out.stderr


def test_refuses_with_vllms_error_when_free_memory_is_below_the_budget(
    machine: Any, server_factory: Any
) -> None:
    s = server_factory(machine, 0.95)  # 30.25 GiB wanted; ~30.1 GiB free after the context
    assert s.wait_ready() is False
    assert s.proc.wait(10) == 1
    log = s.text()
    assert re.search(
        r"ValueError: Free memory on device cuda:0 \(\d+\.\d\d/31\.84 GiB\) on startup is less "
        r"than desired GPU memory utilization \(0\.95, 30\.25 GiB\)\. Decrease GPU memory "
        r"utilization or reduce GPU memory used by other processes\.",
        log,
    )
    assert "RuntimeError: Engine core initialization failed" in log
    assert wait_for(lambda: not machine.state()["servers"])


def test_sigkill_of_the_api_server_leaves_the_engine_holding_memory(
    machine: Any, server_factory: Any
) -> None:
    s = server_factory(machine, 0.93)
    assert s.wait_ready()
    engine = engine_of(s)
    assert "VLLM::EngineCore" in " ".join(engine.cmdline())
    os.kill(s.proc.pid, signal.SIGKILL)
    s.proc.wait(5)
    stays(  # a few world ticks: the engine must survive them
        lambda: engine.is_running() and engine.status() != psutil.STATUS_ZOMBIE,
        for_s=0.3,
        what="the engine alive after its API server's SIGKILL",
    )
    assert engine.pid in {p["pid"] for p in machine.state()["servers"]}
    s.kill_group()  # the group kill is how a supervisor gets rid of the orphan
    assert wait_for(lambda: not machine.state()["servers"])


def test_sigterm_shuts_down_and_frees_memory(machine: Any, server_factory: Any) -> None:
    s = server_factory(machine, 0.93)
    assert s.wait_ready()
    free_before = machine.state()["device"]["free_bytes"]
    engine = engine_of(s)
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(PROCESS_S) == 0
    assert wait_for(lambda: not engine.is_running() or engine.status() == "zombie")
    assert wait_for(lambda: not machine.state()["servers"])
    assert machine.state()["device"]["free_bytes"] > free_before + 29 * GIB
