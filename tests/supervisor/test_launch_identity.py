"""A stop signals only a process tree this profile's vramtop launched, as the process itself
says (the launch id and profile in its environment, matching the record's), or the server the
person adopted (its pid, start and command line as recorded). A state file naming another
process (another profile's server, a `vllm serve` vramtop never started, pid 1) is refused
naming the pid, and reads as damaged: never "crashed" while the profile's server serves."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import psutil
import pytest
from supervisor_helpers import fake_profile, ledger_empty, started_by_hand

from tests.support.ports import free_port
from vramtop import cli, profiles
from vramtop.core.model import ServerState
from vramtop.supervisor import Supervisor, state
from vramtop.supervisor.state import Lifecycle, ServerRecord


def started(name: str, ledger: Path) -> Supervisor:
    profile = fake_profile(name, free_port(), ledger)
    profiles.save_profile(profile)
    sup = Supervisor(profile, memory_released=lambda: ledger_empty(ledger))
    assert sup.start().ok
    return sup


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def written_for(name: str, rec: ServerRecord, **changes: object) -> None:
    """A state file for `profile` written by hand from another record (its pid, start,
    group, tree and launch id), as `cp` or an editor would."""
    data = dataclasses.asdict(rec) | {"profile": name} | changes
    state.state_path(name).write_text(json.dumps(data))


@pytest.mark.parametrize("launch_id", ["copied", "another", None])
def test_a_record_naming_another_profiles_server_never_stops_it(
    home: Path, ledger: Path, launch_id: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = started("demo", ledger)
    real = state.load("demo")
    assert real is not None and real.pid is not None
    other = fake_profile("p1", free_port(), ledger)
    profiles.save_profile(other)
    ids = {"copied": real.launch_id, "another": "0" * 32, None: None}
    written_for("p1", real, launch_id=ids[launch_id])
    try:
        assert cli.main(["stop", "--profile", "p1", "-q"]) != 0
        err = capsys.readouterr()
        assert f"pid {real.pid}" in err.out + err.err
        assert alive(real.pid)
        assert demo.housekeeping().state == ServerState.RUNNING
        assert Supervisor(other).housekeeping().state == ServerState.STOPPED
    finally:
        assert demo.stop().ok
    assert not alive(real.pid)


def test_a_vllm_vramtop_never_started_is_not_stopped_by_a_record_naming_it(
    home: Path, ledger: Path, tmp_path: Path
) -> None:
    profile = fake_profile("p", free_port(), ledger)
    port = free_port()
    with (tmp_path / "by-hand.log").open("wb") as out, started_by_hand(ledger, port, out) as pid:
        proc = psutil.Process(pid)
        assert "vllm" in " ".join(proc.cmdline())  # it looks like one
        for started_by, launch_id in (("vramtop", "a" * 32), ("vramtop", None), ("attached", None)):
            state.save(
                ServerRecord(
                    profile="p",
                    state=Lifecycle.RUNNING,
                    pid=pid,
                    pgid=os.getpgid(pid),
                    create_time=proc.create_time(),
                    tree={str(pid): proc.create_time()},
                    launch_id=launch_id,
                    argv=["vllm", "serve", "m"],  # not its command line
                    started_by=started_by,
                    port=port,
                )
            )
            result = Supervisor(profile).stop()
            assert not result.ok and f"pid {pid}" in result.message, started_by
            assert alive(pid)


def test_a_record_naming_pid_1_reads_as_damaged_and_the_server_is_found_again(
    home: Path, ledger: Path
) -> None:
    sup = started("p", ledger)
    real = state.load("p")
    assert real is not None and real.pid is not None
    init = psutil.Process(1)
    for pid, made in ((1, init.create_time()), (1, real.create_time)):
        written_for("p", real, pid=pid, pgid=1, create_time=made)
        fresh = Supervisor(sup.profile)
        info = fresh.housekeeping()
        assert info.state == ServerState.RUNNING and info.pid == real.pid
        assert "it named pid 1, which is not" in str(fresh.record_note)
        assert alive(real.pid)
    assert sup.stop().ok
    assert not alive(real.pid)


def test_a_record_of_another_profile_in_a_state_file_reads_as_damaged(
    home: Path, ledger: Path
) -> None:
    sup = started("p", ledger)
    real = state.load("p")
    assert real is not None
    written_for("p", real, profile="other")
    assert state.load("p") is None
    assert "profile 'other'" in str(state.unreadable("p"))
    fresh = Supervisor(sup.profile)
    info = fresh.housekeeping()
    assert info.state == ServerState.RUNNING and info.profile == "p"
    assert "rebuilt from the running server" in str(fresh.record_note)
    rec = state.load("p")
    assert rec is not None and rec.profile == "p"
    assert sup.stop().ok


def test_attach_refuses_a_server_vramtop_launched_for_another_profile(
    home: Path, ledger: Path
) -> None:
    demo = started("demo", ledger)
    pid = demo.status().pid
    assert pid is not None
    other = Supervisor(fake_profile("p2", free_port(), ledger))
    try:
        result = other.attach(pid=pid)
        assert not result.ok and "demo" in result.message
        assert state.load("p2") is None
    finally:
        assert demo.stop().ok


def test_an_adopted_server_is_stopped_by_its_recorded_command_line(
    home: Path, ledger: Path, tmp_path: Path
) -> None:
    port = free_port()
    profile = fake_profile("adopted", port, ledger)
    with (tmp_path / "by-hand.log").open("wb") as out, started_by_hand(ledger, port, out) as pid:
        sup = Supervisor(profile)
        assert sup.attach(pid=pid).ok
        rec = state.load("adopted")
        assert rec is not None and rec.started_by == "attached" and not rec.launch_id
        assert sup.stop().ok
        assert not alive(pid)


def test_a_launch_keeps_its_environment_readable_under_a_process_title(
    home: Path, ledger: Path
) -> None:
    """vLLM retitles its processes (setproctitle); the launch asks it to leave the
    environment, where the launch id is read back from, in place."""
    sup = started("titled", ledger)
    pid = sup.status().pid
    assert pid is not None
    try:
        assert psutil.Process(pid).environ().get("SPT_NOENV") == "1"
    finally:
        assert sup.stop().ok


def test_a_stray_session_is_not_part_of_a_launch(home: Path, ledger: Path) -> None:
    """A record whose group is another process's: that group is never signalled."""
    sup = started("grp", ledger)
    stray = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        rec = state.load("grp")
        assert rec is not None
        rec.pgid = stray.pid
        state.save(rec)
        assert sup.stop().ok
        assert stray.poll() is None
    finally:
        stray.kill()
        stray.wait()


def test_a_copied_profile_is_refused_rather_than_acting_on_the_original(
    home: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cp p1.toml p2.toml`: the copy says `name = "p1"`; taken at its word, `start
    --profile p2` wrote p1's state file and `relaunch --profile p2 --save` relaunched p1's
    server. The file name is the profile's one identity."""
    p1 = started("p1", ledger)
    pid = p1.status().pid
    before = state.state_path("p1").read_bytes()
    copy = profiles.profile_path("p2")
    copy.write_bytes(profiles.profile_path("p1").read_bytes())
    copy.chmod(0o600)
    try:
        for args in (
            ["start", "--profile", "p2", "-q"],
            ["relaunch", "--profile", "p2", "--budget", "0.88", "--save", "--no-check", "-q"],
            ["stop", "--profile", "p2", "-q"],
        ):
            assert cli.main(args) == 2, args
            err = capsys.readouterr().err
            assert "p2.toml" in err and 'name = "p2"' in err, err
            assert state.state_path("p1").read_bytes() == before
            assert not state.state_path("p2").exists()
            assert p1.status().pid == pid and alive(pid or 0)
        copy.write_text(copy.read_text().replace('name = "p1"', 'name = "p2"'))
        assert profiles.load_profile("p2").name == "p2"
    finally:
        assert p1.stop().ok


def test_a_record_naming_another_process_as_its_door_never_signals_it(
    home: Path, ledger: Path
) -> None:
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        made = psutil.Process(bystander.pid).create_time()
        state.save(
            ServerRecord(
                profile="p",
                state=Lifecycle.STOPPED,
                front_door=f"127.0.0.1:{free_port()}",
                door_pid=bystander.pid,
                door_create_time=made,
            )
        )
        Supervisor(fake_profile("p", free_port(), ledger)).stop()
        assert bystander.poll() is None and alive(bystander.pid)
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.parametrize(("named", "said"), [("s1", True), ("s1\n\x1b[2Jx", False)])
def test_a_port_held_by_another_profiles_server_says_whose_it_is(named: str, said: bool) -> None:
    """A profile renamed while its server runs: the start of the new name finds the port
    taken, and says by which profile's server (a name only where it is one)."""
    import sys

    from vramtop.supervisor import launch

    port = free_port()
    code = (
        "import socket,sys,time;s=socket.socket();"
        f"s.bind(('127.0.0.1',{port}));s.listen();print('ready',flush=True);time.sleep(60)"
    )
    env = {**os.environ, "VRAMTOP_LAUNCH_ID": "x1", "VRAMTOP_PROFILE": named}
    holder = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"ready\n"
        owner = launch.port_owner("127.0.0.1", port)
        assert owner is not None and f"pid {holder.pid}" in owner
        assert ("the server vramtop launched for profile 's1'" in owner) is said, owner
        assert "\x1b" not in owner and "\n" not in owner
    finally:
        holder.kill()
        holder.wait()
