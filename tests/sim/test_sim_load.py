"""The load generator plays an agent against the fake server, in-process and as a command."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from typing import Any

import psutil
import pytest

from tests.support import http
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.core.vllm.metrics import parse_metrics
from vramtop.sim.load import LoadGenerator


def serving(machine_factory: Any, server_factory: Any, api_key: str | None = None) -> Any:
    """A fast simulated machine and a fake server at 0.93 that is ready: (machine, server)."""
    m = machine_factory(speed=20.0)
    s = server_factory(m, 0.93, **({"api_key": api_key} if api_key else {}))
    assert s.wait_ready()
    return m, s


def test_load_generator_streams_requests(machine_factory: Any, server_factory: Any) -> None:
    _, s = serving(machine_factory, server_factory, api_key="k")
    gen = LoadGenerator(s.url, concurrency=2, api_key="k", pause_s=(0.01, 0.05)).start()
    with contextlib.suppress(AssertionError):  # the assert below says what was missing
        wait_until(lambda: gen.completed >= 2, deadline_s=PROCESS_S, what="two requests")
    gen.stop()
    assert gen.completed >= 2 and gen.tokens > 0 and gen.errors == 0
    out = subprocess.run(
        [sys.executable, "-m", "vramtop.sim.load", "--url", s.url, "--api-key", "k",
         "--requests", "1"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 0 and "load: 1 requests" in out.stdout


def _generated_tokens(url: str) -> float:
    metrics = parse_metrics(http.get(f"{url}/metrics", timeout=5).text)
    return metrics.generation_tokens_total or 0.0


def test_machine_runs_the_agent_as_a_process_of_its_own(
    machine_factory: Any, server_factory: Any
) -> None:
    m, s = serving(machine_factory, server_factory, api_key="k")
    m.agent.start(s.url, m.server_env(), concurrency=1, api_key="k")
    load = m.agent.process
    assert load is not None and load.pid != os.getpid()
    proc = psutil.Process(load.pid)
    assert "k" not in proc.cmdline()  # the key travels in the environment, not in `ps`
    # With the key: the server answered it.
    wait_until(lambda: _generated_tokens(s.url) > 0, deadline_s=PROCESS_S, what="tokens generated")
    m.agent.stop()
    assert m.agent.process is None and load.poll() is not None


@pytest.mark.slow
def test_the_agent_stops_when_the_process_that_started_it_dies(
    machine_factory: Any, server_factory: Any
) -> None:
    # A console killed with SIGKILL cannot stop its agent: the agent notices by itself.
    _, s = serving(machine_factory, server_factory)
    starter = subprocess.Popen(
        [sys.executable, "-c",
         "import os, subprocess, sys, time\n"
         "p = subprocess.Popen([sys.executable, '-m', 'vramtop.sim.load', '--url', sys.argv[1],"
         " '--pause', '0.01', '0.05', '--parent', str(os.getpid())])\n"
         "print(p.pid, flush=True)\n"
         "time.sleep(60)\n",
         s.url],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    agent: psutil.Process | None = None
    try:
        assert starter.stdout is not None
        agent = psutil.Process(int(starter.stdout.readline()))
        wait_until(
            lambda: _generated_tokens(s.url) > 0, deadline_s=PROCESS_S, what="tokens generated"
        )
        assert agent.is_running()
        starter.kill()
        starter.wait(5)
        gone, _ = psutil.wait_procs([agent], timeout=10)
        assert gone, "the agent went on after its parent died"
    finally:
        starter.kill()
        if agent is not None:
            with contextlib.suppress(psutil.NoSuchProcess):
                agent.kill()


def test_the_command_refuses_a_pause_range_upside_down() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "vramtop.sim.load", "--url", "http://127.0.0.1:9",
         "--pause", "2", "1"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 2 and "--pause wants MIN_S <= MAX_S" in out.stderr


def test_agent_mode_rereads_a_growing_context_each_turn() -> None:
    import random

    gen = LoadGenerator("http://127.0.0.1:9", agent=True)
    rng, context = random.Random(1), []
    first = gen._context(context, rng)
    second = gen._context(context, rng)
    assert second.startswith(first) and len(second) > len(first)  # the whole context again
    assert len(first.split()) >= 2000  # thousands of tokens: a prefill every turn


def test_agent_mode_varies_how_many_streams_run(machine_factory: Any, server_factory: Any) -> None:
    _, s = serving(machine_factory, server_factory)
    gen = LoadGenerator(
        s.url, concurrency=2, agent=True, pause_s=(0.01, 0.05), phase_s=(0.5, 1.0)
    ).start()
    seen: set[float] = set()
    prompts: list[float] = []
    try:

        def both_seen() -> bool:
            m = parse_metrics(http.get(f"{s.url}/metrics", timeout=5).text)
            if m.requests_running is not None:
                seen.add(m.requests_running)
            prompts.append(m.prompt_tokens_total or 0.0)
            return {1.0, 2.0} <= seen and len(set(prompts)) > 3

        with contextlib.suppress(AssertionError):  # the asserts below say what was missing
            wait_until(both_seen, deadline_s=PROCESS_S, what="1 and 2 running", poll_s=0.05)
    finally:
        gen.stop()
    assert {1.0, 2.0} <= seen, seen
    assert len(set(prompts)) > 3  # prompts keep arriving: prefill never stops for long
    assert gen.errors == 0
