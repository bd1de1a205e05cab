"""What the console prints when it leaves the server running: a stop command that works as
pasted, for every simulated machine."""

from __future__ import annotations

import shlex

import psutil
import pytest

from tests.support.console import make_app, settle, ticks
from tests.support.fake_backend import FakeBackend
from vramtop import cli, locations
from vramtop.commands.common import demo_card
from vramtop.commands.shared_options import Target
from vramtop.machines import demo_world
from vramtop.sim.card import CARDS
from vramtop.supervisor import state


def _every_card_serving() -> None:
    """A record of each card's demo naming a live process as its server: a bare `--demo`
    is then refused as not saying which."""
    me = psutil.Process()
    for card in CARDS:
        home = locations.demo_dir()
        (home if card == "5090" else home / card).mkdir(parents=True, exist_ok=True, mode=0o700)
        state.save(
            state.ServerRecord(
                profile=demo_world.demo_profile_name(card),
                state=state.Lifecycle.RUNNING,
                pid=me.pid,
                create_time=me.create_time(),
            )
        )


@pytest.mark.parametrize(
    ("card", "wsl", "said"),
    [
        ("spark", False, "vramtop stop --demo --card spark"),
        ("r9700", False, "vramtop stop --demo --card r9700"),
        ("5090", False, "vramtop stop --demo --card 5090"),
        ("5090", True, "vramtop stop --demo --wsl"),
    ],
)
async def test_the_demo_left_running_names_its_machine(card: str, wsl: bool, said: str) -> None:
    # Seen: on --card spark the console said `vramtop stop --demo`, which stops the 5090's.
    backend = FakeBackend(demo=True, wsl=wsl, profile_name=demo_world.demo_profile_name(card))
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("q", "l")
        await settle(pilot)
    assert app.farewell is not None
    assert app.farewell.endswith(f"To stop it: {said}")
    # Pasted while every simulated machine serves, it acts on this one.
    _every_card_serving()
    args = cli.parse_args(shlex.split(said)[1:])
    assert args.command == "stop"
    assert demo_card(Target.from_args(args)) == card


class BehindADoor(FakeBackend):
    @property
    def front_door(self) -> str | None:
        return "127.0.0.1:8001"


async def test_behind_a_front_door_the_farewell_names_the_door() -> None:
    # The agent's address is the door's: vLLM's own port behind it is not where to look.
    backend = BehindADoor(demo=False)
    app = make_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        await pilot.press("q", "l")
        await settle(pilot)
    assert app.farewell == (
        "vLLM is still running (pid 4242) at http://127.0.0.1:8000, behind the front door "
        "127.0.0.1:8001. To stop it: vramtop stop --profile qwen-27b"
    )


@pytest.mark.parametrize("width", [120, 80, 60, 40])
def test_the_farewell_is_wrapped_between_words_with_the_command_whole(width: int) -> None:
    # Seen: printed at 80 columns the terminal cut it inside a word ("fron" / "t door").
    from vramtop.tui.screens.quit_dialog import left_running, wrapped

    backend = FakeBackend(demo=True, wsl=False, profile_name=demo_world.demo_profile_name("spark"))
    farewell = left_running(
        backend.tick().sample,
        demo=True,
        profile=backend.profile_name,
        front_door="127.0.0.1:18001",
    )
    assert farewell is not None
    lines = wrapped(farewell, width).splitlines()
    assert all(len(line) <= width for line in lines), lines
    assert " ".join(lines).split() == farewell.split()  # every word whole, in its order
    assert "vramtop stop --demo --card spark" in lines[-1]  # pasted whole
    assert (len(lines) == 1) == (len(farewell) <= width)
