"""The server's state as the commands tell it, where there is no server to tell of: no profile
at all, and an imported profile whose launch command cannot run here."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from vramtop import cli


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_status_without_any_profile_says_so_instead_of_a_default_server(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["status"], ["status", "--json"]):
        assert cli.main(argv) == 2
        out = capsys.readouterr()
        assert "default: stopped" not in out.out and out.out == ""
        assert "no profile yet" in out.err and "vramtop import" in out.err
        assert len(out.err.strip().splitlines()) == 1


def test_doctor_fails_the_profile_whose_launch_command_is_not_on_path(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # a shell where vLLM is not installed
    script = tmp_path / "launch.sh"
    script.write_text("vllm serve some/model --port 18011\n")
    assert cli.main(["import", str(script), "--name", "broken"]) == 0
    capsys.readouterr()
    cli.main(["doctor", "--json"])
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    profile = checks["profile"]
    assert profile["status"] == "fail", profile
    assert "'vllm' is not on PATH" in profile["detail"] and profile["fix"]


def test_attach_demo_without_a_simulated_server_starts_no_simulated_gpu(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vramtop.machines import demo_world

    assert cli.main(["attach", "--demo"]) == 2
    assert "no simulated server is running" in capsys.readouterr().err
    assert not demo_world.world_alive(demo_world.demo_machine())  # nothing left lingering


def test_status_json_says_when_it_was_read(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # As `--once --json` does: local time with its offset, for the demo and for a profile.
    from vramtop.config import Profile
    from vramtop.profiles import save_profile

    save_profile(Profile(name="quiet", argv=["vllm", "serve", "m"], port=18_123))
    for argv in (["status", "--demo", "--json"], ["status", "--json"]):
        before = datetime.now().astimezone()
        assert cli.main(argv) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["state"] == "stopped"
        stamp = datetime.fromisoformat(data["query_time"])
        assert stamp.tzinfo is not None and stamp >= before.replace(microsecond=0)


def test_status_json_gives_the_last_steps_phases(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vramtop.config import Profile
    from vramtop.event_log import EventLog
    from vramtop.profiles import save_profile

    save_profile(Profile(name="stepped", argv=["vllm", "serve", "m"], port=18_124))
    assert cli.main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["last_step"] is None  # no step yet
    timeline = EventLog.for_profile("stepped")
    timeline.append(1000.0, "start", {"result": "ok", "phases": {"ready_s": 60.0}})
    timeline.append(2000.0, "stop", {"result": "ok"})
    phases = {"stopped_s": 1.5, "weights_gib": 21.8, "weights_s": 18.0, "total_s": 80.25}
    slow = ["compilation took 43 s against 5 s the start before (…)"]
    timeline.append(
        3000.0,
        "restart",
        {"result": "ok", "replayed": 1, "phases": phases, "slow_parts": slow},
    )
    timeline.append(4000.0, "stop", {"result": "ok"})
    assert cli.main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["last_step"] == {
        "action": "restart",
        "t": 3000.0,
        "result": "ok",
        "message": None,
        "phases": phases,
        "slow_parts": slow,
    }


def test_status_says_an_action_under_way_from_another_terminal(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A console's r, a guard or a command restarting the server holds the profile's step
    # lock; the record meanwhile says a moment of it (stopped, starting).
    from vramtop.config import Profile
    from vramtop.profiles import save_profile
    from vramtop.supervisor.handle import ServerHandle
    from vramtop.supervisor.under_way import acting

    profile = Profile(name="busy", argv=["vllm", "serve", "m"], port=18_125)
    save_profile(profile)
    with acting(ServerHandle(profile), "restart", "key"):
        assert cli.main(["status"]) == 0
        first = capsys.readouterr().out.splitlines()[0]
        assert first.startswith("busy: restarting, ") and "s so far" in first, first
        assert "s so far, by a key in a console · the server is stopped" in first, first
        assert cli.main(["status", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["state"] == "stopped"  # the record's, as before
        assert data["under_way"]["action"] == "restart"
        assert data["under_way"]["state_word"] == "restarting"
        assert data["under_way"]["asked_by"] == "key"
        assert isinstance(data["under_way"]["seconds"], float)
    assert cli.main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["under_way"] is None  # done: the record's state
    assert cli.main(["status"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "busy: stopped"
