"""End to end: a real Prometheus scrapes `vramtop export --demo --wsl` every second, a
simulated video call squeezes the card, and `VllmSilentCollapse` and (the WSL VM's memory
spilling into system memory) `VllmSpillToSharedMemory` fire in Prometheus's HTTP API; vLLM
killed fires `VllmServerCrashed` (its pool and rates leave with it, the crash is counted), and
the exporter stopped (SIGSTOP) fires `VramtopExporterDown`.

The rules are the bundled ones with their `for:` shortened to suit a test (the 30 s are
covered by the promtool unit tests in rules_test.yml). Skipped, saying why, where Debian's
`prometheus` package is not installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support import http
from tests.support.prometheus import running_prometheus, stop
from tests.support.waiting import wait_until
from vramtop.commands.export import RULES_FILE, asset_text

TEST_FOR = "2s"
SERVING = re.compile(r"serving http://127\.0\.0\.1:(\d+)/metrics")


def wait_for(what: str, probe: Callable[[], Any], timeout_s: float, every_s: float = 0.5) -> Any:

    def found() -> Any:
        with contextlib.suppress(httpx.HTTPError):
            return probe()
        return None

    return wait_until(found, deadline_s=timeout_s, what=what, poll_s=every_s)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "VRAMTOP_HOME": str(tmp_path / "home"),
        "VRAMTOP_SIM_SCENARIO": "manual",  # the call starts when the test asks
        "VRAMTOP_SIM_SPEED": "2",  # simulated time runs twice as fast
        "VRAMTOP_SIM_STARTUP_S": "0.3",
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)  # this process plays the call on the same machine
    return dict(os.environ, **values)


@dataclass(frozen=True)
class Running:
    address: str  # host:port
    proc: subprocess.Popen[str]


@pytest.fixture
def exporter(env: dict[str, str], tmp_path: Path) -> Iterator[Running]:
    """`vramtop export --demo` on a free port."""
    log = (tmp_path / "export.log").open("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vramtop", "export", "--demo", "--wsl", "--listen", "127.0.0.1:0"],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )

    def serving() -> str | None:
        assert proc.poll() is None, Path(log.name).read_text()
        match = SERVING.search(Path(log.name).read_text())
        return f"127.0.0.1:{match.group(1)}" if match else None

    try:
        yield Running(wait_for("the exporter to listen", serving, 60), proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)  # a test may have stopped it
        stop(proc)
        if proc.returncode != 0:
            # Leave no simulated machine behind if the exporter could not stop it.
            subprocess.run([sys.executable, "-m", "vramtop", "stop", "--demo"], env=env, timeout=60)
        log.close()


@pytest.fixture
def prometheus(exporter: Running, tmp_path: Path) -> Iterator[str]:
    """A real Prometheus scraping the exporter every second; yields its base URL."""
    rules = yaml.safe_load(asset_text(RULES_FILE))
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["for"] = TEST_FOR
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    targets: list[tuple[str, dict[str, str]]] = [(exporter.address, {})]
    with running_prometheus(tmp_path, targets, rule_files=[tmp_path / "rules.yml"]) as base:
        yield base


def query(base: str, promql: str) -> list[dict[str, Any]]:
    body = http.get(f"{base}/api/v1/query", params={"query": promql}, timeout=10).json()
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def alert_states(base: str, name: str) -> list[str]:
    body = http.get(f"{base}/api/v1/alerts", timeout=10).json()
    return [a["state"] for a in body["data"]["alerts"] if a["labels"]["alertname"] == name]


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_simulated_call_fires_the_collapse_and_spill_alerts_in_prometheus(
    prometheus: str, env: dict[str, str]
) -> None:
    from vramtop.machines.demo_world import demo_machine

    wait_for(
        "the exporter's target to be up", lambda: query(prometheus, 'up{job="vramtop"} == 1'), 60
    )
    # vramtop learns the normal decode rate while the coding agent runs.
    normal = wait_for(
        "the normal decode rate in Prometheus",
        lambda: query(prometheus, "vramtop_generation_normal_tokens_per_second > 0"),
        150,
    )
    assert float(normal[0]["value"][1]) > 0
    assert alert_states(prometheus, "VllmSilentCollapse") == []
    assert alert_states(prometheus, "VllmSpillToSharedMemory") == []

    demo_machine(wsl=True).set_call(True)

    wait_for(
        "VllmSilentCollapse to fire",
        lambda: "firing" in alert_states(prometheus, "VllmSilentCollapse"),
        150,
    )
    # Prometheus sees what vramtop sees: the finding opens (the rule's rate path may fire
    # first: the finding waits for 5 of 6 slow samples), the desktop over its allowance.
    wait_for(
        "the contention finding in Prometheus",
        lambda: query(prometheus, 'vramtop_finding_open{kind="vram_contention"} == 1'),
        60,
    )
    assert query(
        prometheus,
        "vramtop_desktop_memory_bytes > ignoring(method) vramtop_desktop_headroom_bytes",
    )
    wait_for(
        "VllmSpillToSharedMemory to fire",
        lambda: "firing" in alert_states(prometheus, "VllmSpillToSharedMemory"),
        60,
    )
    body = http.get(f"{prometheus}/api/v1/alerts", timeout=10).json()
    print(json.dumps(body["data"]["alerts"], indent=1))  # shown with -s: the closing note
    suggested = query(
        prometheus,
        "vramtop_suggested_budget_ratio < ignoring(kind) group_left vramtop_budget_ratio",
    )
    assert suggested and suggested[0]["metric"]["kind"] == "vram_contention"


def firing(base: str, name: str) -> Callable[[], bool]:
    return lambda: "firing" in alert_states(base, name)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_crash_and_a_stopped_exporter_fire_their_alerts_in_prometheus(
    prometheus: str, exporter: Running, env: dict[str, str]
) -> None:
    wait_for("the KV pool in Prometheus", lambda: query(prometheus, "vramtop_kv_pool_bytes"), 90)
    info = wait_for(
        "the server's identity", lambda: query(prometheus, 'vramtop_server_info{model!=""}'), 30
    )
    assert info[0]["metric"]["profile"] == "demo"
    assert query(prometheus, "vramtop_server_crashes_total == 0")
    status = subprocess.run(
        [sys.executable, "-m", "vramtop", "status", "--demo", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    pid = json.loads(status.stdout)["pid"]
    os.kill(pid, signal.SIGKILL)  # vLLM dies without being asked to

    wait_for("VllmServerCrashed to fire", firing(prometheus, "VllmServerCrashed"), 60)
    # What described the server leaves with it: no pool, usage, requests or rate of a dead
    # server; the crash is counted for increase().
    for metric in (
        "vramtop_kv_pool_bytes",
        "vramtop_kv_cache_usage_ratio",
        "vramtop_requests_running",
        "vramtop_generation_normal_tokens_per_second",
    ):
        wait_for(f"{metric} to go", lambda m=metric: not query(prometheus, m), 30)
    assert query(prometheus, "increase(vramtop_server_crashes_total[5m]) > 0")
    assert query(prometheus, 'vramtop_server_info{model!=""}')  # the box still names its model
    assert alert_states(prometheus, "VllmServerDown") == []  # the crash has its own words

    exporter.proc.send_signal(signal.SIGSTOP)  # hung: the target stops answering
    try:
        wait_for("VramtopExporterDown to fire", firing(prometheus, "VramtopExporterDown"), 60)
        assert query(prometheus, 'up{job="vramtop"} == 0')
    finally:
        exporter.proc.send_signal(signal.SIGCONT)
    body = http.get(f"{prometheus}/api/v1/alerts", timeout=10).json()
    print(json.dumps(body["data"]["alerts"], indent=1))  # shown with -s
