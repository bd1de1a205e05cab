"""`attach --port P` where P is a front door of vramtop's: it says so and adopts the vLLM
server behind it (or refuses, saying what to do), never "does not look like a vLLM server"."""

from __future__ import annotations

import subprocess
from functools import partial
from pathlib import Path

import pytest
from supervisor_helpers import fake_profile, started_by_hand

from tests.support.ports import free_port
from vramtop.profiles import save_profile
from vramtop.supervisor import Supervisor, door, state


def test_attach_at_a_door_adopts_the_server_behind_it(home: Path, ledger: Path) -> None:
    # Seen: `vramtop attach --port P` on the demo's door said "pid … (python -m
    # vramtop.frontdoor --listen) does not look like a vLLM server".
    port, door_port = free_port(), free_port()
    address = f"127.0.0.1:{door_port}"
    with started_by_hand(ledger, port, subprocess.DEVNULL) as server_pid:
        spawned = door.spawn("elsewhere", address, port, 600.0)
        assert not isinstance(spawned, str), spawned
        door_pid, made = spawned
        try:
            save_profile(fake_profile("own", port, ledger))
            sup = Supervisor(fake_profile("own", port, ledger))
            result = sup.attach(port=door_port)
            assert result.ok, result.message
            assert result.message.startswith(
                f"port {door_port} is vramtop's front door (pid {door_pid}, on {address}), not "
                f"vLLM; the vLLM server behind it listens on port {port}: attached to pid "
                f"{server_pid} on port {port}"
            )
            rec = state.load("own")
            assert rec is not None and (rec.pid, rec.port) == (server_pid, port)
            # By the door's pid: the same server, already attached.
            again = sup.attach(pid=door_pid)
            assert again.ok and again.message.endswith(f"already attached to pid {server_pid}")
            assert again.message.startswith(
                f"pid {door_pid} is vramtop's front door (on {address}), not vLLM; "
            )
        finally:
            door.stop(
                state.ServerRecord(
                    profile="elsewhere",
                    front_door=address,
                    door_pid=door_pid,
                    door_create_time=made,
                )
            )


def test_attach_at_a_door_with_no_server_behind_it_says_what_to_do(
    home: Path, ledger: Path
) -> None:
    door_port = free_port()
    address = f"127.0.0.1:{door_port}"
    spawned = door.spawn("elsewhere", address, None, 600.0)  # holding: no server yet
    assert not isinstance(spawned, str), spawned
    door_pid, made = spawned
    try:
        sup = Supervisor(fake_profile("own", free_port(), ledger))
        result = sup.attach(port=door_port)
        assert not result.ok
        assert result.message == (
            f"port {door_port} is vramtop's front door (pid {door_pid}, on {address}), not "
            "vLLM, and no vLLM server is behind it now (it holds requests until one serves): "
            "nothing was attached; start that server, or give --port or --pid of the vLLM "
            "server itself"
        )
        assert state.load("own") is None
    finally:
        door.stop(
            state.ServerRecord(
                profile="elsewhere", front_door=address, door_pid=door_pid, door_create_time=made
            )
        )


@pytest.mark.parametrize(
    ("owner", "wsl", "said"),
    [
        ("demo-spark", False, "act on it with --demo --card spark"),
        ("demo-r9700", False, "act on it with --demo --card r9700"),
        ("demo", True, "act on it with --demo --wsl"),
        ("s1", False, "act on it with --profile s1"),
    ],
)
def test_attach_refusing_another_profiles_server_names_it_as_a_person_would(
    home: Path, ledger: Path, monkeypatch: pytest.MonkeyPatch, owner: str, wsl: bool, said: str
) -> None:
    """The demo's own server is acted on with the demo's words (as the quit farewell's stop
    command), not with a profile name the demo never asked anyone to type."""
    from vramtop.machines.demo_world import profile_options

    port = free_port()
    # As vramtop launches a server for a profile: the child carries both.
    monkeypatch.setenv("VRAMTOP_LAUNCH_ID", "x1")
    monkeypatch.setenv("VRAMTOP_PROFILE", owner)
    with started_by_hand(ledger, port, subprocess.DEVNULL) as server_pid:
        sup = Supervisor(fake_profile("own", port, ledger))
        result = sup.attach(port=port, options_of=partial(profile_options, wsl=wsl))
        assert not result.ok
        assert f"pid {server_pid} is the server vramtop launched for profile {owner}" in (
            result.message
        )
        assert result.detail == said


@pytest.mark.parametrize(
    ("owner", "said"),
    [
        ("demo-spark", "`vramtop stop --demo --card spark` ends it)"),
        ("demo", "`vramtop stop --demo --card 5090` ends it)"),
        ("s1", "`vramtop stop --profile s1` ends it, with profiles/s1.toml in place)"),
    ],
)
@pytest.mark.parametrize("where", ["port", "front_door"])
def test_a_port_held_by_another_profiles_server_names_the_command_that_ends_it(
    home: Path,
    ledger: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    owner: str,
    said: str,
    where: str,
) -> None:
    """`vramtop start` refused because another profile's server holds the port (or the front
    door's): the stop command it gives works pasted, in the demo's words for a demo's."""
    from vramtop import cli

    port = free_port()
    monkeypatch.setenv("VRAMTOP_LAUNCH_ID", "x1")
    monkeypatch.setenv("VRAMTOP_PROFILE", owner)
    with started_by_hand(ledger, port, subprocess.DEVNULL) as server_pid:
        monkeypatch.delenv("VRAMTOP_LAUNCH_ID")
        monkeypatch.delenv("VRAMTOP_PROFILE")
        profile = fake_profile("own", port if where == "port" else free_port(), ledger)
        if where == "front_door":
            profile = profile.model_copy(update={"front_door": f"127.0.0.1:{port}"})
        save_profile(profile)
        assert cli.main(["start", "--profile", "own"]) != 0
        err = capsys.readouterr().err
        assert f"pid {server_pid}" in err and said in err, err


@pytest.mark.parametrize("through", ["door", "server"])
@pytest.mark.parametrize("whose", ["own", "own-unnamed", "elsewhere"])
def test_attach_names_the_door_in_front_of_the_server_and_adopts_its_own(
    home: Path, ledger: Path, through: str, whose: str
) -> None:
    """Found at its door or at its own port, a server with a front door in front of it: the
    door is this profile's (its token), adopted with the server; or another profile's,
    named, with how this profile gets one of its own. A door of this profile that the profile
    does not name (`front_door`) is adopted, and attach says how to keep it past the next
    start (a launch stops a door its profile does not name)."""
    owner = "elsewhere" if whose == "elsewhere" else "own"
    port, door_port = free_port(), free_port()
    address = f"127.0.0.1:{door_port}"
    with started_by_hand(ledger, port, subprocess.DEVNULL) as server_pid:
        spawned = door.spawn(owner, address, port, 600.0)
        assert not isinstance(spawned, str), spawned
        door_pid, made = spawned
        try:
            profile = fake_profile("own", port, ledger)
            if whose == "own":
                profile = profile.model_copy(update={"front_door": address})
            sup = Supervisor(profile)
            result = sup.attach(port=door_port if through == "door" else port)
            assert result.ok and f"attached to pid {server_pid}" in result.message
            where = f"the front door on {address} (pid {door_pid}) in front of it is"
            rec = state.load("own")
            assert rec is not None and rec.pid == server_pid
            if whose != "elsewhere":
                if whose == "own":
                    assert f"{where} this profile's and is kept with it" in result.message
                else:
                    keep = "to keep it past the next start, give this profile front_door"
                    assert f'{where} this profile\'s; {keep} = "{address}"' in result.message
                assert (rec.front_door, rec.door_pid, rec.internal_port) == (
                    address,
                    door_pid,
                    port,
                )
            else:
                assert f"{where} profile elsewhere's and stays so" in result.message
                # (not `vramtop stop --profile elsewhere`: that stops the server it names)
                assert f"end that door (pid {door_pid})" in result.message
                assert f'give this profile front_door = "{address}"' in result.message
                assert rec.front_door is None
        finally:
            door.stop(
                state.ServerRecord(
                    profile=owner, front_door=address, door_pid=door_pid, door_create_time=made
                )
            )
