"""`vramtop relaunch` as a person types it on the demo's simulated machine: a budget that
cannot start goes back to the one that served, and the exit code and stderr say so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_run import run_captured
from tests.support.waiting import wait_until
from vramtop.outcomes import ExitCode


def run_vramtop(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ, VRAMTOP_HOME=str(home), VRAMTOP_SIM_STARTUP_S="0.3", VRAMTOP_SIM_SPEED="20"
    )
    return subprocess.run(
        [sys.executable, "-m", "vramtop", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.slow
def test_a_relaunch_that_cannot_start_exits_5_and_the_old_budget_serves(tmp_path: Path) -> None:
    assert ExitCode.ROLLED_BACK == 5
    try:
        started = run_vramtop(tmp_path, "start", "--demo", "-q")
        assert started.returncode == 0, started.stderr
        before = json.loads(run_vramtop(tmp_path, "status", "--demo", "--json").stdout)
        budget = before["gpu_memory_utilization"]

        # --no-check: past vramtop's own check, so that vLLM itself refuses the start.
        result = run_vramtop(tmp_path, "relaunch", "--demo", "--budget", "0.99", "--no-check", "-q")
        assert result.returncode == ExitCode.ROLLED_BACK, result.stderr
        first = result.stderr.splitlines()[0]
        assert first.startswith("vramtop: relaunch at 0.99 failed: out of memory at startup")
        assert first.endswith(f"; the previous flags ({budget:g}) serve again")
        assert result.stdout == ""

        after = json.loads(run_vramtop(tmp_path, "status", "--demo", "--json").stdout)
        assert after["state"] == "running" and after["healthy"] is True
        assert after["gpu_memory_utilization"] == budget
        assert after["pid"] != before["pid"]  # the previous command, started again
    finally:
        run_vramtop(tmp_path, "stop", "--demo", "--all", "-q")


@pytest.mark.slow
def test_flags_vllm_would_refuse_are_refused_before_the_server_is_stopped(
    tmp_path: Path,
) -> None:
    try:
        started = run_vramtop(tmp_path, "start", "--demo", "-q")
        assert started.returncode == 0, started.stderr
        before = json.loads(run_vramtop(tmp_path, "status", "--demo", "--json").stdout)
        # The demo serves 262,144 tokens at 0.93: at 0.85 one such request does not fit.
        result = run_vramtop(tmp_path, "relaunch", "--demo", "--budget", "0.85", "-q")
        assert result.returncode == ExitCode.USAGE, result.stderr
        lines = result.stderr.splitlines()
        assert lines[0].startswith("vramtop: not relaunched (the server keeps serving): vLLM")
        assert "max seq len (262144)" in lines[0]
        assert lines[-1] == (
            "vramtop: --max-model-len 163840 fits at 0.85: "
            "vramtop relaunch --budget 0.85 --max-model-len 163840"
        )
        after = json.loads(run_vramtop(tmp_path, "status", "--demo", "--json").stdout)
        assert after["pid"] == before["pid"] and after["state"] == "running"
        ok = run_vramtop(
            tmp_path, "relaunch", "--demo", "--budget", "0.85", "--max-model-len", "163840", "-q"
        )
        assert ok.returncode == 0, ok.stderr
    finally:
        run_vramtop(tmp_path, "stop", "--demo", "--all", "-q")


@pytest.mark.slow
@pytest.mark.parametrize("card", ["5090", "spark"])
def test_ctrl_c_during_a_start_says_the_server_goes_on_loading(tmp_path: Path, card: str) -> None:
    import signal

    demo = ["--demo", "--card", card]

    # A load far longer than the polls that look for it: on a loaded two-core machine each
    # `status` is a process of its own taking seconds, and a 20 s load could be missed.
    env = dict(
        os.environ, VRAMTOP_HOME=str(tmp_path), VRAMTOP_SIM_STARTUP_S="90", VRAMTOP_SIM_SPEED="1"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "vramtop", "start", *demo],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # A person's Ctrl+C, at a terminal: a runner started in the background by a shell
        # without job control ignores SIGINT, and its children inherit that (Python then
        # never raises KeyboardInterrupt, and the start runs to "ready", exit 0).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stderr is not None
        # Until the server is launched (its record names its pid): a Ctrl+C before that ends
        # the start before there is a server to go on loading.
        # Only while it loads: a Ctrl+C once it is ready (a loaded machine's slow polls can
        # miss the whole load) ends a start that has nothing left to wait for.
        status: dict[str, Any] = {}

        def loading() -> bool:
            status.update(json.loads(run_vramtop(tmp_path, "status", *demo, "--json").stdout))
            return bool(status["state"] == "starting" and status.get("pid"))

        wait_until(
            loading, deadline_s=80, what=lambda: f"the demo server seen loading; last: {status}"
        )
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130
        shown = " ".join(demo)
        assert f"goes on loading: `vramtop status {shown}` follows it" in err
        assert f"`vramtop stop {shown}` ends it" in err
        status = json.loads(run_vramtop(tmp_path, "status", *demo, "--json").stdout)
        assert status["state"] in ("starting", "running")
    finally:
        proc.kill()
        run_vramtop(tmp_path, "stop", *demo, "--all", "-q")


def test_relaunch_save_on_the_demo_is_refused_with_the_reason() -> None:
    code, said = run_captured(["relaunch", "--demo", "--budget", "0.8", "--save"])
    assert code == 2
    assert said.strip() == (
        "vramtop: --save writes the change into the profile's file, and the demo's profile "
        "has none (it is made afresh each run): leave out --save"
    )
