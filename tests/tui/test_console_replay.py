"""A recording in the console: its end is marked, and no key is offered that cannot act."""

from __future__ import annotations

from pathlib import Path

from tests.support.console import make_app, replay_app, text, ticks
from tests.support.synthetic import Card, build, field_report
from vramtop.core.model import Sample
from vramtop.session.writer import SessionWriter
from vramtop.tui.widgets.console_header import ConsoleHeader
from vramtop.tui.widgets.finding_banner import FindingBanner
from vramtop.tui.widgets.server_log import ServerLog
from vramtop.tui.widgets.tail_log import TailLog
from vramtop.tui.widgets.throughput_panel import ThroughputPanel


def record_collapse(path: Path, until_t: float = 200.0) -> None:
    """The field report cut off during the call: the collapse is still open at the end."""
    header = {"started_at": "2026-11-29T14:02:11Z", "host": {"wsl": True}}
    with SessionWriter(path, header) as writer:
        for item in build(Card(wsl=True), field_report(call_at=120, restart_at=400)):
            if isinstance(item, Sample):
                if item.t > until_t:
                    break
                writer.sample(item)
            else:
                t, name, detail = item
                writer.event(t, name, detail)


async def test_a_finished_replay_says_so_and_offers_no_action_keys(tmp_path: Path) -> None:
    path = tmp_path / "collapse.jsonl"
    record_collapse(path)
    now = [0.0]
    app, backend = replay_app(path, lambda: now[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 1)
        assert "ended" not in text(app, ConsoleHeader)
        now[0] = 1_000.0
        await ticks(pilot, 1)
        assert backend.finished
        assert "ended at 200s" in text(app, ConsoleHeader)
        banner = text(app, FindingBanner)
        assert "The desktop is squeezing vLLM's memory" in banner
        assert "r restart now" not in banner and "b relaunch" not in banner
        # The remedy said, not offered as a key: the finding's own budget (0.83 for this
        # desktop: a call's 3 GiB above where it stood, a margin).
        util = app.shown.findings[0].remedy.budget
        assert util is not None and 0.8 <= util < 0.93
        assert f"remedy: relaunch at {util:.2f}" in banner and "events" in banner
        # The clock stopped with the recording: no more ticks, no flat line added.
        assert "the clock stopped" in text(app, ConsoleHeader)
        assert app._ticker._task is None  # the timer that asks for reads is stopped
        plotted = app.query_one(ThroughputPanel).generation_history
        await ticks(pilot, 3)  # the last frame again, three times
        assert app.query_one(ThroughputPanel).generation_history == plotted
        # No log lines in this recording: the panel says so rather than staying blank.
        shown = app.query_one(ServerLog).query_one(TailLog).kept.texts
        assert any("No server output" in line for line in shown)


async def test_space_pauses_the_replay_and_the_arrows_step_it(tmp_path: Path) -> None:
    path = tmp_path / "collapse.jsonl"
    record_collapse(path)
    now = [0.0]
    app, _backend = replay_app(path, lambda: now[0])
    async with app.run_test(size=(120, 40)) as pilot:
        now[0] = 5.0
        await ticks(pilot, 1)
        assert app.sample is not None
        at = app.sample.t
        header = text(app, ConsoleHeader)
        # A recorded pid is not a process of this machine.
        assert "recorded pid" in header and "● running pid" not in header
        await pilot.press("space")
        await ticks(pilot, 1)
        assert "paused" in text(app, ConsoleHeader)
        now[0] = 9.0  # 40 s of recording at ×10: none of it is played while paused
        await ticks(pilot, 2)
        assert app.sample.t == at
        await pilot.press("right")
        await ticks(pilot, 1)
        forward = app.sample.t
        assert forward > at and "one sample forward" in text(app, ConsoleHeader)
        await pilot.press("left")
        await ticks(pilot, 1)
        assert app.sample.t == at
        await pilot.press("space")  # plays on from where it stands
        now[0] = 10.0
        await ticks(pilot, 1)
        assert app.sample.t > at and "paused" not in text(app, ConsoleHeader)


async def test_a_replays_help_lists_the_keys_that_work_there(tmp_path: Path) -> None:
    path = tmp_path / "collapse.jsonl"
    record_collapse(path)
    app, _backend = replay_app(path, lambda: 0.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 1)
        rows = {binding: words for _key, words, binding in app.help_rows()}
        assert "restart" not in rows and "relaunch" not in rows and "start_stop" not in rows
        assert {"pause", "back", "forward", "timeline", "help"} <= set(rows)
        # Each name fits the help's column for it (12 cells, one of padding): never cut.
        assert all(len(binding) <= 11 for binding in rows), rows
        assert rows["quit"] == "quit"  # nothing runs here that q could ask about
        await pilot.press("q")  # and it quits at once, as the help says
        await pilot.pause()
        assert not app.is_running or app.actions.quitting


async def test_the_live_console_neither_shows_nor_lists_the_replay_keys() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 1)
        rows = {binding for _key, _words, binding in app.help_rows()}
        assert not rows & {"pause", "back", "forward"}
        assert "quit" in rows and "restart" in rows
