"""A planned stop seen by a re-attached console is a stop, never a crash.

The daily case: the console was quit leaving vLLM running, opened again later, and the
server is stopped from another shell (`vramtop stop`). The stop finishes inside one tick, so
the console sees RUNNING, then STOPPED, and never STOPPING: that is the end of a stop that
was asked for (only a stop writes STOPPED; an exit nobody asked for is CRASHED), not an exit.
Pilot drives the console on the simulated machine's real processes; the stop is the real
supervisor's, from a Supervisor of its own (the other shell)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot

from tests.support.waiting import PROCESS_S, wait_until_async
from vramtop.core.findings import SERVER_CRASHED
from vramtop.core.model import ServerState
from vramtop.machines.demo_backend import begin_demo, demo_backend
from vramtop.machines.demo_world import stop_demo_world
from vramtop.settings import Settings
from vramtop.tui.app import VramtopApp

# The field's interval: a stop on the simulated machine takes well under a second.
ONE_SECOND = Settings(interval_s=1.0)
RUNS = 20


@pytest.fixture(autouse=True)
def fast_sim(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("VRAMTOP_SIM_STARTUP_S", "0.2")
    yield
    stop_demo_world()


async def wait_for(
    pilot: Pilot[int], what: Callable[[], bool], words: str, timeout: float = PROCESS_S
) -> None:
    await wait_until_async(what, deadline_s=timeout, what=words, pause=pilot.pause)


def shows(app: VramtopApp, state: ServerState) -> Callable[[], bool]:
    def check() -> bool:
        info = app.sample.info if app.sample else None
        return info is not None and info.state is state

    return check


@pytest.mark.slow  # 20 real starts and stops, each seen by a console: about a minute
async def test_a_stop_from_another_shell_is_never_a_crash_on_a_re_attached_console() -> None:
    shell = begin_demo().supervisor  # `vramtop start` and `vramtop stop`, from another shell
    crashes: list[int] = []
    for run in range(RUNS):
        started = await asyncio.to_thread(shell.start)
        assert started.ok, started.message
        backend, _ = demo_backend(start_server=False, agent=False)
        assert backend.autostart is False  # re-attached: the server was running already
        app = VramtopApp(backend, ONE_SECOND)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, shows(app, ServerState.RUNNING), "the console to show running")
            stopped = await asyncio.to_thread(shell.stop)
            assert stopped.ok, stopped.message
            await wait_for(pilot, shows(app, ServerState.STOPPED), "the console to show stopped")
            await pilot.pause()
            kinds = [f.kind for f in backend.session.all_findings()]
            events = [e.name for e in backend.session.events()]
            if SERVER_CRASHED in kinds:
                crashes.append(run)
            assert "exit" in events and "stop" in events, events
        backend.close(stop_server=False)  # as a quit that leaves the simulated GPU up
    assert crashes == [], f"server_crashed after a planned stop in runs {crashes} of {RUNS}"


@pytest.mark.slow
async def test_restart_after_a_kill_9_does_not_ask_about_the_dead_servers_requests() -> None:
    import os
    import signal

    from vramtop.tui.widgets.console_header import ConsoleHeader

    backend, _ = demo_backend(start_server=True, agent=True)
    app = VramtopApp(backend, Settings(interval_s=0.25))
    async with app.run_test(size=(120, 40)) as pilot:

        def serving_requests() -> bool:
            server = app.sample.server if app.sample else None
            metrics = server.metrics if server else None
            return bool(metrics and metrics.requests_running) and app.busy is None

        await wait_for(pilot, serving_requests, "requests being served", timeout=60)
        info = app.sample.info if app.sample else None
        assert info is not None and info.pid is not None
        os.kill(info.pid, signal.SIGKILL)

        def down() -> bool:
            server = app.sample.server if app.sample else None
            return server is not None and not server.reachable

        await wait_for(pilot, down, "the console to see the server down")
        await pilot.press("r")
        await pilot.pause()
        header = str(app.query_one(ConsoleHeader).render())
        assert "request(s) running" not in header, header
        await wait_for(pilot, lambda: app.busy is None, "the restart to end", timeout=60)
    backend.close(stop_server=True)
