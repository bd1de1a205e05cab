"""A start that cannot write its state file after it opened the front door (a full disk; here
a directory standing where the file goes) stops that door again: no record would name it, and
it would hold its port, and any request sent to it, for nobody."""

from __future__ import annotations

from pathlib import Path

from tests.support.ports import free_port
from vramtop.config import Profile, parse_door_address
from vramtop.supervisor import Supervisor, launch, state


def test_a_start_that_cannot_save_its_state_leaves_no_front_door(home: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    profile = Profile(
        name="p1",
        argv=["vllm", "serve", "m", "--port", str(free_port())],
        front_door=address,
    )
    state.state_path("p1").mkdir(parents=True, mode=0o700)  # the save cannot replace it

    result = Supervisor(profile).start()

    assert not result.ok
    assert f"cannot write {state.state_path('p1')}" in result.message
    host, port = parse_door_address(address)
    assert launch.port_owner(host, port) is None, "the door opened for the start was left"
