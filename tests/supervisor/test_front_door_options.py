"""The front door's settings: the profile's fields, `--front-door` on import and on the demo,
and the state record's added fields (a record written before them still reads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vramtop import cli, ports
from vramtop.config import ConfigError, Profile, parse_door_address
from vramtop.profile_file import load_profile_file
from vramtop.supervisor import door, state


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("127.0.0.1:8000", ("127.0.0.1", 8000)),
        ("localhost:8001", ("localhost", 8001)),
        ("[::1]:8000", ("::1", 8000)),
        (" 0.0.0.0:9000 ", ("0.0.0.0", 9000)),
    ],
)
def test_a_door_address_is_host_and_port(text: str, parsed: tuple[str, int]) -> None:
    assert parse_door_address(text) == parsed


@pytest.mark.parametrize(
    "text", ["8000", "127.0.0.1", ":8000", "h:0", "h:70000", "::1:80", "a b:1"]
)
def test_a_bad_door_address_says_what_is_wrong(text: str) -> None:
    with pytest.raises(ValueError, match=r"HOST:PORT|port|host"):
        parse_door_address(text)


def test_a_profile_file_with_a_bad_door_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('name = "p"\nargv = ["vllm", "serve", "m"]\nfront_door = "8000"\n')
    with pytest.raises(ConfigError, match=r"front_door.*HOST:PORT"):
        load_profile_file(path)
    path.write_text('name = "p"\nargv = ["vllm", "serve", "m"]\nfront_door = "127.0.0.1:8000"\n')
    profile = load_profile_file(path)
    assert profile.front_door == "127.0.0.1:8000"
    assert (profile.front_door_hold_s, profile.drain_s) == (600.0, 120.0)


def test_import_takes_front_door_and_refuses_a_bad_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    script = tmp_path / "launch.sh"
    script.write_text("vllm serve m --port 8000\n")
    assert cli.main(["import", str(script), "--print", "--front-door", "nope"]) == 2
    err = capsys.readouterr().err
    assert "--front-door 'nope'" in err and "HOST:PORT" in err and "Traceback" not in err
    assert cli.main(["import", str(script), "--print", "--front-door", "127.0.0.1:8000"]) == 0
    assert 'front_door = "127.0.0.1:8000"' in capsys.readouterr().out
    # Without a door the door's settings are not written into the profile.
    assert cli.main(["import", str(script), "--print"]) == 0
    assert "drain_s" not in capsys.readouterr().out


def test_front_door_goes_with_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    assert cli.main(["start", "--front-door", "127.0.0.1:8000"]) == 2
    assert "--front-door goes with --demo" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["start", "--demo", "--front-door", "8000"])
    assert exc.value.code == 2
    assert "HOST:PORT" in capsys.readouterr().err


def test_a_record_written_before_the_door_still_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    state.save(state.ServerRecord(profile="old", state=state.Lifecycle.STOPPED, port=8000))
    path = state.state_path("old")
    data = json.loads(path.read_text())
    for name in ("front_door", "door_pid", "door_create_time", "door_restarts", "internal_port"):
        del data[name]
    path.write_text(json.dumps(data))
    rec = state.load("old")
    assert rec is not None and rec.front_door is None and rec.door_restarts == 0
    data |= {"door_pid": -4, "internal_port": 8000}
    path.write_text(json.dumps(data))
    assert "door_pid" in (state.unreadable("old") or "")


def test_the_profile_keeps_its_port_with_a_door() -> None:
    profile = Profile(
        name="p", argv=["vllm", "serve", "m", "--port", "8000"], front_door="127.0.0.1:8000"
    )
    assert profile.port == 8000 and profile.url == "http://127.0.0.1:8000"


def test_the_port_behind_the_door_is_chosen_below_the_ephemeral_range_and_kept() -> None:
    # vLLM binds it only after its imports; a port of the ephemeral range could be taken by
    # any outgoing connection meanwhile ("Address already in use" from vLLM).
    door_port = door.kept_internal_port("p")  # as if the door listened where vLLM was
    port = door.internal_port_for_launch("p", door_port=door_port)
    assert port != door_port and ports.CHOSEN_FROM <= port < ports.ephemeral_floor()
    assert door.kept_internal_port("p") == port  # written, and kept for the next launch
