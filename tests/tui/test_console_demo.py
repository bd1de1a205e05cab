"""The console through Pilot on the real simulated machine: a separate simulated GPU, the fake
vLLM server supervised like a real one, the simulated agent. Keys act on real processes."""

from __future__ import annotations

import psutil
import pytest

from tests.support.console import FAST, header, running_pid, wait_for
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.machines.demo_backend import demo_backend
from vramtop.machines.demo_world import stop_demo_world
from vramtop.tui.app import VramtopApp
from vramtop.tui.screens.budget_dialog import BudgetDialog
from vramtop.tui.screens.quit_dialog import QuitDialog
from vramtop.tui.widgets.kv_pool_panel import KvPoolPanel

pytestmark = pytest.mark.usefixtures("sim_world")


def generating(app: VramtopApp) -> bool:
    rates = app.sample.rates if app.sample else None
    return bool(rates and rates.generation_tps and rates.generation_tps > 5)


@pytest.mark.slow
async def test_restart_budget_relaunch_and_reattach_on_the_simulator() -> None:
    backend, _ = demo_backend(wsl=False)
    app = VramtopApp(backend, FAST)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: running_pid(app) is not None and generating(app))
        first_pid = running_pid(app)
        assert "RTX 5090" in header(app) and "budget 0.93" in header(app)
        kv = str(app.query_one(KvPoolPanel).render())
        assert "9.26 GiB" in kv

        # r: restart (a second r confirms when requests are running)
        await pilot.press("r")
        await pilot.pause()
        if app.busy is None:
            assert "press r again" in header(app)
            await pilot.press("r")
            await pilot.pause()
        assert app.busy == "restart"
        await wait_for(pilot, lambda: running_pid(app) not in (None, first_pid))
        await wait_for(pilot, lambda: generating(app))
        assert (
            psutil.pid_exists(first_pid) is False or psutil.Process(first_pid).status() == "zombie"
        )

        # b, - ×8, enter: relaunch at 0.85
        await pilot.press("b")
        await pilot.pause()
        assert isinstance(app.screen, BudgetDialog)
        for _ in range(8):
            await pilot.press("minus")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "budget 0.85" in header(app) and running_pid(app) is not None)

        def scraped_budget() -> float | None:
            # The header's budget is the record's; the new server's own metrics, scraped
            # (a scrape that timed out keeps the old server's, marked stale), say it too.
            server = app.sample.server if app.sample else None
            if server is None or server.stale or server.metrics is None:
                return None
            return server.metrics.cache.gpu_memory_utilization

        await wait_for(pilot, lambda: scraped_budget() == 0.85)
        relaunched_pid = running_pid(app)

        # q, enter: leave vLLM running
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, QuitDialog)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not app.is_running, timeout=PROCESS_S)
    assert relaunched_pid is not None and psutil.pid_exists(relaunched_pid)

    # a second console re-attaches to the same server instead of starting another
    backend2, _ = demo_backend(wsl=False)
    assert backend2.autostart is False
    app2 = VramtopApp(backend2, FAST)
    async with app2.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: running_pid(app2) == relaunched_pid)
        assert "budget 0.85" in header(app2)
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("s")  # this time: stop vLLM
        await wait_for(pilot, lambda: not app2.is_running, timeout=PROCESS_S)
    assert not psutil.pid_exists(relaunched_pid) or (
        psutil.Process(relaunched_pid).status() == "zombie"
    )


def test_a_call_on_a_simulated_machine_that_is_gone_raises_instead_of_saying_ended() -> None:
    # The console says "could not be changed" when this raises; a False here read as "ended".
    from vramtop.sim.world_protocol import WorldUnreachable

    backend, _owned = demo_backend(start_server=False)
    try:
        assert backend.toggle_call() is True  # the machine answers: the call starts
        stop_demo_world()

        def toggled() -> bool:
            backend.toggle_call()  # raises once the world has gone
            return False

        with pytest.raises(WorldUnreachable):
            wait_until(toggled, deadline_s=PROCESS_S, what="the world gone", poll_s=0.1)
    finally:
        backend.close(True)
