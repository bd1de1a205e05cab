"""The header's state line says what the server is doing now: a load's seconds so far (and
the last start's total), a running process that answers nothing, a recorded pid."""

from __future__ import annotations

from tests.support.console import make_app, text, ticks
from tests.support.fake_backend import EPOCH, FakeBackend
from vramtop.core.model import ServerState
from vramtop.tui.widgets.console_header import ConsoleHeader


async def test_a_load_shows_its_seconds_and_the_last_starts_total() -> None:
    backend = FakeBackend()  # running: its start took 94 s
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 1)
        assert "ready in 1m34s" in text(app, ConsoleHeader)
        # A new start (a restart): its record has no time to ready yet.
        backend.state, backend.ready_s = ServerState.STARTING, None
        backend.started_at = EPOCH + backend.t - 41.0
        await ticks(pilot, 1)
        header = text(app, ConsoleHeader)
        assert "● starting pid 4242 · 42s so far (last start: 1m34s)" in header, header
        await ticks(pilot, 10)
        assert "52s so far" in text(app, ConsoleHeader)


async def test_a_first_load_shows_its_seconds_alone() -> None:
    backend = FakeBackend()
    backend.state, backend.ready_s = ServerState.STARTING, None
    backend.started_at = EPOCH - 7.0
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 1)
        header = text(app, ConsoleHeader)
        assert "s so far" in header and "last start" not in header


async def test_a_running_server_that_answers_nothing_is_not_called_running() -> None:
    backend = FakeBackend()
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 2)
        assert "● running pid 4242" in text(app, ConsoleHeader)
        backend.metrics_error = "/metrics did not answer within 2 s"  # SIGSTOP, a hang
        await ticks(pilot, 2)
        header = text(app, ConsoleHeader)
        assert "● not answering" in header and "● running" not in header
        assert "pid 4242" in header
        backend.metrics_error = None
        await ticks(pilot, 1)
        assert "● running pid 4242" in text(app, ConsoleHeader)
