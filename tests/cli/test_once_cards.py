"""`vramtop --demo --card spark|r9700 --once --json`: each simulated machine's memory model in
the JSON contract, end to end (real processes, the real CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_once import run_vramtop, sim_processes_under

from tests.support.waiting import PROCESS_S, wait_until
from vramtop.core.model import GIB


def once(tmp_path: Path, card: str) -> dict:
    result = run_vramtop(tmp_path, "--demo", "--card", card, "--once", "--json")
    assert result.returncode == 0, result.stderr
    # Processes signalled a moment ago may still be exiting on a loaded machine.
    wait_until(
        lambda: not sim_processes_under(tmp_path),
        deadline_s=PROCESS_S,
        what="the demo's simulated processes to end",
    )
    return json.loads(result.stdout)


@pytest.mark.slow
def test_spark_is_unified_memory_with_the_system_as_the_desktop(tmp_path: Path) -> None:
    data = once(tmp_path, "spark")
    gpu = data["gpus"][0]
    assert gpu["name"] == "NVIDIA GB10"
    assert gpu["memory_kind"] == "unified"
    assert gpu["total_bytes"] > 110 * GIB  # the shared pool
    assert gpu["gtt_used_bytes"] is None
    split = data["split"]
    assert split["memory_kind"] == "unified" and split["method"] == "per_process"
    assert split["detail"].startswith("Unified memory (shared with the system)")
    # The system's other use (kernel, desktop, browser) is the desktop's share.
    assert 8 * GIB < split["desktop_bytes"] < 11 * GIB
    assert data["server"]["gpu_memory_utilization"] == 0.75
    assert split["budget_bytes"] == pytest.approx(0.75 * split["total_bytes"], rel=1e-6)
    assert data["kv_pool"]["gib"] > 60  # a budget of the shared pool leaves a large KV pool


@pytest.mark.slow
def test_r9700_reports_gtt_per_process(tmp_path: Path) -> None:
    data = once(tmp_path, "r9700")
    gpu = data["gpus"][0]
    assert gpu["name"] == "AMD Radeon AI PRO R9700"
    assert gpu["memory_kind"] == "dedicated"
    assert gpu["gtt_total_bytes"] > gpu["gtt_used_bytes"] > 0
    server = max(gpu["processes"], key=lambda p: p["used_bytes"])
    assert server["gtt_bytes"] == 0  # nothing evicted while the desktop is idle
    assert data["split"]["server_gtt_bytes"] == 0
    assert data["server"]["gpu_memory_utilization"] == 0.9


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--card", "spark", "--once"], "use it with --demo"),
        (["--demo", "--card", "spark", "--wsl", "--once"], "run Linux"),
    ],
)
def test_card_arguments_that_cannot_be_used_exit_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = run_vramtop(tmp_path, *args)
    assert result.returncode == 2
    assert message in result.stderr


def test_an_unknown_card_is_bad_usage(tmp_path: Path) -> None:
    result = run_vramtop(tmp_path, "--demo", "--card", "h100", "--once")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
