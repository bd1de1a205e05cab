"""The demo's other machines and options, remembered by the next command: every command that
takes --demo takes --card (and finds the one demo machine that runs by itself), a server's
front door is the one its record names, `attach --demo` finds the vLLM server behind the
door, and a simulated machine already running is said to be used as it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support import http
from tests.support.cli_run import run_captured
from tests.support.ports import free_port
from tests.support.waiting import PROCESS_S, wait_until
from vramtop import locations
from vramtop.commands.common import demo_card
from vramtop.commands.errors import CommandError
from vramtop.commands.shared_options import Target
from vramtop.machines import demo_world
from vramtop.supervisor import state


def run_vramtop(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "VRAMTOP_HOME": str(home),
        "VRAMTOP_SIM_STARTUP_S": "0.3",
        "VRAMTOP_SIM_SPEED": "20",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "vramtop", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
    )


def status(home: Path, *args: str) -> dict[str, Any]:
    result = run_vramtop(home, *args, "--json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.mark.slow
def test_every_command_acts_on_the_card_named_or_the_one_running(tmp_path: Path) -> None:
    try:
        started = run_vramtop(tmp_path, "start", "--demo", "--card", "spark", "-q")
        assert started.returncode == 0, started.stderr
        # Named before the subcommand, after it, by its profile, or not at all (the only one).
        for how in (
            ("--demo", "--card", "spark", "status"),
            ("status", "--demo", "--card", "spark"),
            ("status", "--demo", "--profile", "demo-spark"),
            ("status", "--demo"),
        ):
            data = status(tmp_path, *how)
            assert (data["profile"], data["state"]) == ("demo-spark", "running"), how
        pid = data["pid"]
        found = run_vramtop(tmp_path, "stop", "--demo", "--help")
        assert "--card" in found.stdout
        auto = run_vramtop(tmp_path, "status", "--demo")
        assert auto.stdout.startswith("demo-spark: running")
        assert auto.stderr == (
            "vramtop: acting on the simulated spark machine, the one whose server runs "
            "(--card 5090 names the default one)\n"
        )
        # attach finds the vLLM server behind the demo's door, not the door's process.
        attached = run_vramtop(tmp_path, "attach", "--demo", "--card", "spark")
        assert attached.returncode == 0, attached.stderr
        assert attached.stdout.strip() == f"already attached to pid {pid}"
        events = run_vramtop(tmp_path, "events", "--demo", "--json")
        assert events.returncode == 0, events.stderr
        assert any(e["event"] == "start" for e in json.loads(events.stdout)["events"])
        logs = run_vramtop(tmp_path, "logs", "--demo", "--card", "spark", "-n", "5")
        assert logs.returncode == 0, logs.stderr

        # What runs is used as it is, and said so where another scenario or speed is asked.
        asked = run_vramtop(
            tmp_path,
            "status",
            "--demo",
            VRAMTOP_SIM_SCENARIO="field_report",
            VRAMTOP_SIM_SPEED="4",
        )
        assert asked.returncode == 0, asked.stderr
        assert "the simulated spark machine already runs (scenario spark, speed 20)" in (
            asked.stderr
        )
        assert "VRAMTOP_SIM_SCENARIO=field_report VRAMTOP_SIM_SPEED=4 not applied" in asked.stderr
        assert "vramtop stop --demo --card spark --all" in asked.stderr

        stopped = run_vramtop(tmp_path, "stop", "--demo", "--card", "spark", "-q")
        assert stopped.returncode == 0, stopped.stderr
        wait_until(
            lambda: not psutil.pid_exists(pid), deadline_s=PROCESS_S, what="the spark server ends"
        )
        data = status(tmp_path, "status", "--demo", "--card", "spark")
        assert (data["profile"], data["state"]) == ("demo-spark", "stopped")
    finally:
        run_vramtop(tmp_path, "stop", "--demo", "--card", "spark", "--all", "-q")


@pytest.mark.slow
def test_a_custom_front_door_stays_where_it_was_started(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    try:
        started = run_vramtop(tmp_path, "start", "--demo", "--front-door", address, "-q")
        assert started.returncode == 0, started.stderr
        before = status(tmp_path, "status", "--demo")
        assert before["front_door"] == address and before["door_running"]

        restarted = run_vramtop(tmp_path, "restart", "--demo", "-q")
        assert restarted.returncode == 0, restarted.stderr
        after = status(tmp_path, "status", "--demo")
        assert after["front_door"] == address and after["door_pid"] == before["door_pid"]
        assert after["pid"] != before["pid"]

        relaunched = run_vramtop(tmp_path, "relaunch", "--demo", "--max-model-len", "131072", "-q")
        assert relaunched.returncode == 0, relaunched.stderr
        last = status(tmp_path, "status", "--demo")
        assert last["front_door"] == address and last["door_pid"] == before["door_pid"]
        assert last["max_model_len"] == 131072
        answer = http.get(f"http://{address}/health", timeout=10)
        assert answer.status_code == 200
        # attach finds the vLLM server behind the door, not the door's process.
        attached = run_vramtop(tmp_path, "attach", "--demo")
        assert attached.returncode == 0, attached.stderr
        assert attached.stdout.strip() == f"already attached to pid {last['pid']}"
    finally:
        run_vramtop(tmp_path, "stop", "--demo", "--all", "-q")


def test_attach_with_no_simulated_server_names_the_command_for_its_card() -> None:
    code, said = run_captured(["attach", "--demo", "--card", "spark"])
    assert code == 2
    assert said.strip() == (
        "vramtop: no simulated server is running to attach to "
        "(vramtop start --demo --card spark starts one)"
    )


def _serving_as(card: str) -> None:
    """A record of `card`'s demo naming a live process (this test's) as its server."""
    home = locations.demo_dir()
    (home if card == "5090" else home / card).mkdir(parents=True, exist_ok=True, mode=0o700)
    me = psutil.Process()
    state.save(
        state.ServerRecord(
            profile=demo_world.demo_profile_name(card),
            state=state.Lifecycle.RUNNING,
            pid=me.pid,
            create_time=me.create_time(),
        )
    )


def test_the_card_is_the_one_running_and_two_running_are_asked_about(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert demo_card(Target(demo=True)) == "5090"  # none runs: the default
    _serving_as("r9700")
    assert demo_card(Target(demo=True)) == "r9700"
    assert "acting on the simulated r9700 machine" in capsys.readouterr().err
    assert demo_card(Target(demo=True, wsl=True)) == "5090"  # the WSL2 way is the 5090's
    assert demo_card(Target(demo=True, card="spark")) == "spark"
    assert demo_card(Target(demo=True, profile="demo-spark")) == "spark"
    _serving_as("spark")
    with pytest.raises(CommandError, match=r"run on spark and r9700: say which with --card"):
        demo_card(Target(demo=True))
    with pytest.raises(CommandError, match=r"--profile mine: with --demo the profiles are"):
        demo_card(Target(demo=True, profile="mine"))
    with pytest.raises(CommandError, match=r"--profile demo-spark is the spark demo"):
        demo_card(Target(demo=True, card="r9700", profile="demo-spark"))


def test_a_running_machine_unlike_the_one_asked_for_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    machine = demo_world.demo_machine(card="5090")
    running: dict[str, object] = {"ok": True, "speed": 1.0, "scenario": "manual"}
    assert demo_world.unlike_asked(machine, running) is None  # nothing asked
    monkeypatch.setenv("VRAMTOP_SIM_SCENARIO", "manual")
    monkeypatch.setenv("VRAMTOP_SIM_SPEED", "1")
    assert demo_world.unlike_asked(machine, running) is None  # asked for what runs
    monkeypatch.setenv("VRAMTOP_SIM_SPEED", "4")
    said = demo_world.unlike_asked(machine, running)
    assert said is not None and "VRAMTOP_SIM_SPEED=4 not applied" in said
    assert "`vramtop stop --demo --card 5090 --all`" in said
