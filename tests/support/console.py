"""The console's Pilot helpers: an app on the fake backend or replaying a recording, waiting
for its reads, what a widget or the status line shows, the steps most tests take (a call that
collapses, the budget dialog opened), and a finding to show."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.renderables.blank import Blank
from textual.widget import Widget
from textual.worker import WorkerCancelled

from tests.support.fake_backend import FakeBackend
from tests.support.waiting import PROCESS_S, wait_until_async
from vramtop.core.findings import Finding
from vramtop.core.model import ServerState
from vramtop.machines.replay_backend import ReplayBackend
from vramtop.settings import Settings
from vramtop.tui.app import VramtopApp
from vramtop.tui.screens.budget_dialog import BudgetDialog
from vramtop.tui.widgets.console_header import ConsoleHeader

# Ticks are driven by the tests (`settle`), never by the wall clock.
NO_TIMER = Settings(interval_s=3600)
# A console on the simulated machine (real processes, on the wall clock) reads four times a
# second; its tests wait for what they expect (`wait_for`).
FAST = Settings(interval_s=0.25)
# How often a test asks whether a read it asked for has been shown (the fake backend reads in
# well under a millisecond).
POLL_S = 0.002


def make_app(backend: FakeBackend | None = None, settings: Settings | None = None) -> VramtopApp:
    backend = backend or FakeBackend()
    return VramtopApp(backend, settings or NO_TIMER, clock=backend.clock)


def replay_app(
    path: Path, clock: Callable[[], float], speed: float = 10.0
) -> tuple[VramtopApp, ReplayBackend]:
    """A console replaying the recording at `path` at `speed`, on a clock the test moves."""
    backend = ReplayBackend(path, speed=speed, clock=clock)
    return VramtopApp(backend, NO_TIMER, clock=clock), backend


async def settle(pilot: Pilot[int]) -> None:
    """Let every action finish, every read asked for be shown, and every message they
    posted be handled (a finished action asks for a read)."""
    app = pilot.app
    assert isinstance(app, VramtopApp)
    for _ in range(4):
        # The reader lives as long as the console: wait for the others, and for its reads.
        actions = [w for w in app.workers if w.group != "tick"]
        if actions:  # (an empty list means every worker to Textual)
            # A worker cancelled meanwhile (the app closing, an exclusive one replaced) has
            # ended too: Textual says so by raising.
            with contextlib.suppress(WorkerCancelled):
                await app.workers.wait_for_complete(actions)
        await _reads_shown(pilot)


async def open_timeline(pilot: Pilot[int], timeout_s: float = PROCESS_S) -> None:
    """Press e, and wait until the timeline has read the profile's lasting events (in a
    thread: the screen opens before)."""
    from vramtop.tui.screens.timeline_screen import TimelineScreen

    await pilot.press("e")
    screen = pilot.app.screen
    assert isinstance(screen, TimelineScreen)
    waited = 0.0
    while not screen.lasting_read:
        if waited > timeout_s:
            raise AssertionError(f"the lasting timeline was not read within {timeout_s} s")
        await pilot.pause(0.01)
        waited += 0.01
    await pilot.pause()


async def start_a_call_and_let_it_collapse(pilot: Pilot[int]) -> None:
    """Two quiet ticks, a simulated call (v), then four ticks: the fake backend collapses."""
    await ticks(pilot, 2)
    await pilot.press("v")
    await settle(pilot)
    await ticks(pilot, 4)


async def open_budget_dialog(pilot: Pilot[int]) -> BudgetDialog:
    """Press b, and the relaunch's budget dialog it opens (asserted open)."""
    await pilot.press("b")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, BudgetDialog)
    return screen


async def wait_for(
    pilot: Pilot[int],
    what: Callable[[], bool],
    timeout: float = PROCESS_S,
    about: Callable[[], object] = lambda: "the console",
) -> None:
    """Wait until `what()` holds, for a console on real processes (`FAST`); `about()`, the
    action running and the header are in the failure."""
    app = pilot.app
    assert isinstance(app, VramtopApp)
    await wait_until_async(
        what,
        deadline_s=timeout,
        what=lambda: f"{about()}; busy={app.busy!r} header: {header(app)}",
        pause=pilot.pause,
        poll_s=0.1,
    )


async def ticks(pilot: Pilot[int], count: int) -> None:
    app = pilot.app
    assert isinstance(app, VramtopApp)
    # The first frame's own read is asked once that frame is drawn, which a busy machine can
    # put off past here: asked beside the first tick's, the two were one read, and the
    # console showed a sample fewer than the ticks asked for.
    await wait_until_async(
        lambda: app.reader.asked > 0,
        deadline_s=PROCESS_S,
        what="the first frame's own read asked for",
        pause=pilot.pause,
    )
    await _reads_shown(pilot)  # that read, first: one read per tick
    for _ in range(count):
        app.request_tick()
        await _reads_shown(pilot, idle=False)


async def _reads_shown(
    pilot: Pilot[int], timeout_s: float = PROCESS_S, *, idle: bool = True
) -> None:
    """Wait until every read asked for is shown, then until the console is `idle` (what
    follows a frame done: a first frame's own read asked for, an action's outcome), or, for
    a read asked by a tick, until the messages its sample posted are handled."""
    app = pilot.app
    assert isinstance(app, VramtopApp)
    waited = 0.0
    while app.reads_pending:
        if waited > timeout_s:
            raise AssertionError(f"no sample shown within {timeout_s} s of asking for a read")
        await pilot.pause(POLL_S)
        waited += POLL_S
    await pilot.pause(None if idle else 0)


def text(app: VramtopApp, selector: str | type[Widget]) -> str:
    """Everything the widget (and its children) shows, as plain text."""
    root = app.screen.query_one(selector)
    parts = []
    for widget in [root, *root.query("*")]:
        if widget.display is False:
            continue
        rendered: Any = widget.render()
        if isinstance(rendered, Blank):
            continue  # a container's own background (the banner's scrolling box)
        parts.append(getattr(rendered, "plain", str(rendered)))
    return "\n".join(parts)


def header(app: VramtopApp) -> str:
    """The header's words."""
    return str(app.query_one(ConsoleHeader).render())


def running_pid(app: VramtopApp) -> int | None:
    """The server's pid while it runs and no action is under way; else None."""
    info = app.sample.info if app.sample else None
    if info is None or info.state is not ServerState.RUNNING or app.busy:
        return None
    return info.pid


def status_line(app: VramtopApp) -> str:
    """What the status line says (progress, or the last action's result); "" when nothing."""
    return app.shown.activity or ""


def open_finding(kind: str = "vram_contention", **fields: Any) -> Finding:
    """An open critical finding of `kind` at t=0, with `fields` (summary, remedy, …)."""
    fields.setdefault("summary", "squeezed")
    return Finding(
        kind=kind, severity="critical", first_seen_t=0.0, last_seen_t=0.0, closed_t=None, **fields
    )


def distinct_lines(count: int, prefix: str) -> list[str]:
    """Log lines that do not fold into one row: each says something else (the log folds
    lines that differ only in their numbers)."""
    return [f"INFO {prefix} " + "".join("ghijklmnop"[int(d)] for d in str(i)) for i in range(count)]


async def toggle_call(pilot: Pilot[int]) -> None:
    """Press `v` and wait for the simulated call to have begun or ended: the key acts in a
    worker, and ticks read what it did only once it is done, whatever the machine's load."""
    app = pilot.app
    assert isinstance(app, VramtopApp)
    await pilot.press("v")
    calls = [w for w in app.workers if w.group == "call"]
    if calls:
        with contextlib.suppress(WorkerCancelled):
            await app.workers.wait_for_complete(calls)
