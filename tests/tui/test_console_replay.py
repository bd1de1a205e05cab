"""A recording in the console: its end is marked, and no key is offered that cannot act."""

from __future__ import annotations

from pathlib import Path

from test_console_app import text

from tests.support.console import NO_TIMER, ticks
from tests.support.synthetic import Card, build, field_report
from vramtop.core.model import Sample
from vramtop.machines.replay_backend import ReplayBackend
from vramtop.session.writer import SessionWriter
from vramtop.tui.app import VramtopApp
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
    backend = ReplayBackend(path, speed=10.0, clock=lambda: now[0])
    app = VramtopApp(backend, NO_TIMER, clock=lambda: now[0])
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
        shown = app.query_one(ServerLog).query_one(TailLog).texts
        assert any("No server output" in line for line in shown)
