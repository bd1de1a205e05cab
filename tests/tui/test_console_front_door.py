"""The demo console behind its front door (Pilot, the real simulated machine): the agent's
requests go through the door, vramtop reads the simulated vLLM behind it, and a door killed
with SIGKILL is started again and said on the status line and in the timeline."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest
from textual.widgets import DataTable

from tests.support.console import FAST, wait_for
from vramtop.core.model import ServerState
from vramtop.machines.demo_backend import demo_backend
from vramtop.machines.demo_world import DEMO_PROFILE
from vramtop.machines.interface import Backend
from vramtop.supervisor import door, state
from vramtop.tui.app import VramtopApp
from vramtop.tui.widgets.console_header import ConsoleHeader

pytestmark = pytest.mark.usefixtures("sim_world")


def served(rec: state.ServerRecord) -> int:
    report = door.info(rec) or {}
    return int(report.get("served") or 0)


@pytest.mark.slow
async def test_the_demo_console_goes_through_its_front_door(
    closed_at_end: Callable[[Backend], None],
) -> None:
    backend, _ = demo_backend(wsl=False)
    closed_at_end(backend)
    app = VramtopApp(backend, FAST)
    async with app.run_test(size=(120, 40)) as pilot:

        def running() -> bool:
            info = app.sample.info if app.sample else None
            return info is not None and info.state is ServerState.RUNNING and not app.busy

        await wait_for(pilot, running)
        rec = state.load(DEMO_PROFILE)
        assert rec is not None and rec.front_door is not None and door.alive(rec)
        # The agent's address is the door's; vramtop reads vLLM on its own port behind it.
        assert backend.url == f"http://127.0.0.1:{rec.internal_port}"
        await wait_for(pilot, lambda: served(rec) >= 2)

        assert rec.door_pid is not None
        os.kill(rec.door_pid, signal.SIGKILL)
        await wait_for(
            pilot, lambda: any(e.name == "door_restarted" for e in backend.session.events())
        )
        # The console says so, on its status line, as the event arrives.
        said = f"the front door had died; it was started again ({rec.front_door})"
        await wait_for(pilot, lambda: said in str(app.query_one(ConsoleHeader).render()))
        again = state.load(DEMO_PROFILE)
        assert again is not None and again.door_pid != rec.door_pid and door.alive(again)
        await wait_for(pilot, lambda: served(again) >= 1)  # the agent is served again

        await pilot.press("e")
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        rows = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert "door_restarted" in rows
