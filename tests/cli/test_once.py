"""`vramtop --once --json`, end to end: real processes, the simulated machine, the real CLI."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.support.waiting import PROCESS_S, wait_until
from vramtop.core.model import GIB


def run_vramtop(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, VRAMTOP_HOME=str(home), VRAMTOP_SIM_STARTUP_S="0.3")
    return subprocess.run(
        [sys.executable, "-m", "vramtop", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def sim_processes_under(home: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue  # exited, holds nothing; its parent (init here) reaps it
            cmd = " ".join(proc.info["cmdline"] or [])
            if "vramtop.sim" in cmd and str(home) in " ".join(proc.environ().values()) + cmd:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


@pytest.mark.slow
def test_demo_once_json_shows_the_field_report_machine_and_cleans_up(tmp_path: Path) -> None:
    result = run_vramtop(tmp_path, "--demo", "--once", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    gpu = data["gpus"][0]
    assert gpu["name"] == "NVIDIA GeForce RTX 5090"
    assert gpu["total_bytes"] == 32607 * 1024**2
    assert gpu["processes"] is not None
    assert data["split"]["method"] == "per_process"
    # the server's share is its process tree's: the budget at 0.93 plus what lies outside it
    assert data["split"]["server_bytes"] >= data["split"]["budget_bytes"]
    assert data["server"]["state"] == "running" and data["server"]["healthy"] is True
    assert data["server"]["gpu_memory_utilization"] == 0.93
    # Added: the start it made, its phases as vramtop and the simulated vLLM's log tell them.
    step = data["last_step"]
    assert step["action"] == "start" and step["result"] == "ok"
    assert step["phases"]["ready_s"] >= 0 and step["phases"]["weights_gib"] > 0
    kv = data["kv_pool"]
    assert abs(kv["bytes"] / GIB - 9.26) < 0.01
    # The field report's model: 262,144 tokens fit at 0.93.
    assert kv["dtype"] == "fp8" and kv["max_model_len"] == 262144
    assert 262_144 <= kv["tokens"] < 300_000  # one request of the whole ceiling fits
    # The rates against the normal, as the console shows them (added: the throughput view).
    view = data["throughput"]
    assert view["requests_running"] == data["requests"]["running"]
    if data["normal_rate"] is None:
        assert view["normal_origin"] == "can't judge yet"
        assert view["normal_per_request_tps"] is None
    # Processes signalled a moment ago may still be exiting on a loaded machine.
    wait_until(
        lambda: not sim_processes_under(tmp_path),
        deadline_s=PROCESS_S,
        what="the demo's simulated processes to end",
    )


@pytest.mark.slow
def test_demo_wsl_derives_the_split_without_per_process_numbers(tmp_path: Path) -> None:
    result = run_vramtop(tmp_path, "--demo", "--wsl", "--no-windows", "--once", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["gpus"][0]["processes"] is None
    assert data["windows"] is None
    split = data["split"]
    assert split["method"] == "derived"
    assert "WSL2" in split["detail"]
    parts = split["server_bytes"] + split["desktop_bytes"] + split["free_bytes"]
    assert parts == split["total_bytes"]
    assert 0.5 * GIB < split["desktop_bytes"] < 3 * GIB  # the idle simulated desktop


@pytest.mark.slow
def test_demo_wsl_with_the_windows_side_names_the_desktop(tmp_path: Path) -> None:
    result = run_vramtop(tmp_path, "--demo", "--wsl", "--once", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["gpus"][0]["processes"] is None
    windows = data["windows"]
    assert windows["wsl_vm_name"] == "vmmemWSL"
    assert {p["name"] for p in windows["desktop"]} >= {"dwm.exe", "msedge.exe"}
    split = data["split"]
    assert split["method"] == "windows"
    used = data["gpus"][0]["used_bytes"]
    assert split["server_bytes"] == min(windows["wsl_vm_dedicated_bytes"], used)
    assert "msedge.exe" in split["detail"]


def test_unreachable_url_is_a_snapshot_and_a_clear_message_with_exit_code_6(
    tmp_path: Path,
) -> None:
    from tests.support.ports import free_port

    result = run_vramtop(tmp_path, "--once", "--json", "--url", f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 6  # ExitCode.NOT_SERVING; 2 is bad usage
    assert "cannot reach the vLLM server" in result.stderr
    assert "Traceback" not in result.stderr
    data = json.loads(result.stdout)
    assert data["server"]["reachable"] is False and data["server"]["healthy"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--wsl", "--once"], "--wsl only applies"),
        (["--json"], "use it with --once"),
        (["--once", "--url", "localhost:8000"], "not an http(s) URL"),
        (["--once", "--interval", "-1"], "must be at least 0.1 seconds"),
    ],
)
def test_unusable_arguments_exit_2_with_a_message(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = run_vramtop(tmp_path, *args)
    assert result.returncode == 2
    assert message in result.stderr


# `vramtop --demo --once` with Ctrl+C arriving while the backend loads, and a note on stderr
# of what the server's record said at that moment.
_INTERRUPTED_WHILE_LOADING = """
import sys
from vramtop.machines import demo_backend as module
def interrupted(**kwargs):
    print("STATE " + kwargs["start"].supervisor.status().state, file=sys.stderr)
    raise KeyboardInterrupt
module.demo_backend = interrupted
from vramtop import entry
sys.argv[0] = "vramtop"
entry.run()
"""


@pytest.mark.slow
def test_demo_once_launches_the_server_before_the_backend_loads_and_ctrl_c_stops_it(
    tmp_path: Path,
) -> None:
    result = _demo_once_interrupted(tmp_path, _INTERRUPTED_WHILE_LOADING)
    assert "STATE starting" in result.stderr  # the server loads while the backend does
    # and what this command started (the server, the simulated GPU) is stopped again
    assert not _sim_processes_left(tmp_path), "the interrupted --once left processes behind"
    status = run_vramtop(tmp_path, "status", "--demo", "--json")
    assert json.loads(status.stdout)["state"] == "stopped"


@pytest.mark.slow
def test_demo_once_stops_the_server_it_started_where_the_simulated_gpu_ran_already(
    tmp_path: Path,
) -> None:
    """A console left the simulated GPU running with its server stopped: `--demo --once`
    starts the server for its answer and stops it again; the GPU leaves by itself."""
    assert run_vramtop(tmp_path, "start", "--demo").returncode == 0
    assert run_vramtop(tmp_path, "stop", "--demo").returncode == 0  # the GPU stays
    try:
        result = run_vramtop(tmp_path, "--demo", "--once", "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["server"]["state"] == "running"
        status = run_vramtop(tmp_path, "status", "--demo", "--json")
        assert json.loads(status.stdout)["state"] == "stopped"
        wait_until(
            lambda: all(
                "vramtop.sim.world" in " ".join(p.cmdline()) for p in sim_processes_under(tmp_path)
            ),
            deadline_s=PROCESS_S,
            what="only the simulated world left running",
        )
        left = [" ".join(p.cmdline()) for p in sim_processes_under(tmp_path)]
        assert left and all("vramtop.sim.world" in cmd for cmd in left), left
    finally:
        run_vramtop(tmp_path, "stop", "--demo", "--all")


_INTERRUPTED_WHILE_THE_GPU_STARTS = """
import sys
from vramtop.machines import demo_backend as module
def interrupted(*args, **kwargs):
    raise KeyboardInterrupt
module.demo_profile = interrupted
from vramtop import entry
sys.argv[0] = "vramtop"
entry.run()
"""


def test_ctrl_c_while_the_simulated_gpu_starts_leaves_no_gpu_behind(tmp_path: Path) -> None:
    """The simulated GPU's daemon starts while the rest loads: Ctrl+C then stops it too."""
    _demo_once_interrupted(tmp_path, _INTERRUPTED_WHILE_THE_GPU_STARTS)
    assert not _sim_processes_left(tmp_path), "the simulated GPU was left running"


def _demo_once_interrupted(home: Path, script: str) -> subprocess.CompletedProcess[str]:
    """`vramtop --demo --once` run by `script` (which interrupts it somewhere): Ctrl+C's exit,
    no traceback."""
    env = dict(os.environ, VRAMTOP_HOME=str(home), VRAMTOP_SIM_STARTUP_S="0.3")
    result = subprocess.run(
        [sys.executable, "-c", script, "--demo", "--once"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 130
    assert "Traceback" not in result.stderr
    return result


def _sim_processes_left(home: Path) -> list[psutil.Process]:
    """The simulated machine's processes under `home` still there once `PROCESS_S` has passed."""
    with contextlib.suppress(AssertionError):
        wait_until(
            lambda: not sim_processes_under(home), deadline_s=PROCESS_S, what="no process left"
        )
    return sim_processes_under(home)
