"""A launch whose command cannot run at all (`vllm` not on PATH) is no crash: vLLM never
started, and neither a restart nor another budget can help. The real supervisor launches the
real command; the session's diagnosis reads the states it records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sim_helpers import gone

from tests.support.cli_run import run_captured
from tests.support.ports import free_port
from tests.support.waiting import PROCESS_S, wait_until
from vramtop import locations, profile_file
from vramtop.config import Profile
from vramtop.core.findings import LAUNCH_FAILED, SERVER_CRASHED
from vramtop.core.model import GpuReading, Sample, ServerInfo, ServerState
from vramtop.session.live import LiveSession
from vramtop.supervisor import Supervisor, state
from vramtop.supervisor.launch import launch_problem
from vramtop.tui.widgets.console_header import _server_line

MISSING = "vllm-that-is-not-installed-here"


def profile(prelude: str | None) -> Profile:
    return Profile(
        name="imported",
        argv=[MISSING, "serve", "some/model", "--gpu-memory-utilization", "0.9"],
        port=free_port(),
        prelude=prelude,
        stop_timeout_s=3,
    )


def diagnosed(infos: list[ServerInfo]) -> LiveSession:
    session = LiveSession()
    for t, info in enumerate(infos):
        session.observe(Sample(t=float(t), gpu=GpuReading(error="no GPU here"), info=info))
    return session


@pytest.mark.parametrize("prelude", ["export PATH=/usr/bin:/bin", None])
def test_a_command_not_on_path_is_a_launch_failure_not_a_crash(
    home: Path, prelude: str | None
) -> None:
    sup = Supervisor(profile(prelude))
    result = sup.start(timeout_s=20)
    assert not result.ok
    rec = state.load("imported")
    assert rec is not None and rec.state == state.Lifecycle.CRASHED
    assert rec.error_kind == "launch_failed", rec
    assert rec.last_error is not None and MISSING in rec.last_error
    assert "could not run" in result.message or "could not launch" in result.message

    ended = sup.status()
    session = diagnosed([ServerInfo(state=ServerState.STARTING, profile="imported"), ended])
    kinds = [f.kind for f in session.all_findings()]
    assert kinds == [LAUNCH_FAILED], kinds
    finding = session.findings()[0]
    assert finding.remedy.restart_fails and finding.remedy.action == "fix_profile"
    assert "never started" in finding.summary and SERVER_CRASHED not in kinds


def test_a_launch_that_never_started_is_said_so_in_the_status_line_and_status(
    home: Path,
) -> None:
    """One state word for it everywhere the state is said: the banner says vLLM never
    started, and so do the console's status line and `vramtop status`, never "crashed"."""
    made = profile(None)
    profile_file.save_profile_file(locations.profiles_dir() / "imported.toml", made)
    assert not Supervisor(made).start(timeout_s=20).ok
    ended = Supervisor(made).status()
    assert ended.state is ServerState.CRASHED  # (the session format's word stays)

    line = _server_line(Sample(t=0.0, gpu=GpuReading(), info=ended), 0.0)
    assert line[0] == ("● never started", "bold $error"), line
    code, said = run_captured(["status", "--profile", "imported"])
    assert code == 0 and said.startswith("imported: never started"), said
    code, said = run_captured(["status", "--profile", "imported", "--json"])
    data = json.loads(said)
    assert data["state"] == "crashed" and data["state_word"] == "never started", data


def test_an_exit_of_unknown_code_is_said_so_not_code_none() -> None:
    # A server vramtop did not start itself: its exit code never reaches vramtop.
    session = diagnosed(
        [
            ServerInfo(state=ServerState.RUNNING, profile="p"),
            ServerInfo(state=ServerState.CRASHED, profile="p", last_error="the server exited"),
        ]
    )
    crash = [f for f in session.all_findings() if f.kind == SERVER_CRASHED]
    assert crash and "None" not in crash[0].summary and "exit code not known" in crash[0].summary


def test_a_server_that_served_and_then_died_is_still_a_crash() -> None:
    session = LiveSession()
    infos = [
        ServerInfo(state=ServerState.STARTING, profile="p"),
        ServerInfo(state=ServerState.RUNNING, profile="p"),
        ServerInfo(state=ServerState.CRASHED, profile="p", returncode=127),
    ]
    for t, info in enumerate(infos):
        session.observe(Sample(t=float(t), gpu=GpuReading(error="no GPU here"), info=info))
    assert [f.kind for f in session.all_findings()] == [SERVER_CRASHED]


def test_doctor_names_a_launch_command_that_cannot_run(home: Path) -> None:
    said = launch_problem(profile(None))
    assert said is not None and MISSING in said
    assert launch_problem(profile("export PATH=/usr/bin:/bin")) is not None
    runnable = Profile(name="ok", argv=["python3", "-c", "pass"], port=free_port())
    assert launch_problem(runnable) is None
    with_prelude = Profile(
        name="ok", argv=["python3", "-c", "pass"], port=free_port(), prelude="true"
    )
    assert launch_problem(with_prelude) is None


def test_a_prelude_that_hangs_is_ended_with_all_it_started(home: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    hangs = Profile(
        name="ok",
        argv=["python3", "-c", "pass"],
        port=free_port(),
        prelude=f"sleep 1000 & echo $! > {pids}.tmp && mv {pids}.tmp {pids}; wait",
    )
    assert launch_problem(hangs, prelude_timeout_s=2) is None  # not known in time
    (child,) = [int(pid) for pid in pids.read_text().split()]
    wait_until(
        lambda: gone([child]), deadline_s=PROCESS_S, what="the prelude's sleep ended by the check"
    )
