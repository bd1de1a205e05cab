"""An unexpected error in the console ends it with the traceback in vramtop's log and one line
on the terminal, and an exit code that says it failed: it ended with exit 0, nothing logged."""

from __future__ import annotations

import logging

import pytest

from tests.support.console import make_app, settle
from tests.support.fake_backend import FakeBackend
from vramtop.tui.app import VramtopApp


async def test_an_error_in_an_action_is_logged_and_said_in_one_line(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    app: VramtopApp = make_app(FakeBackend())

    def broken() -> None:
        raise RuntimeError("a bug in an action")

    caplog.set_level(logging.ERROR, logger="vramtop.tui.app")
    with pytest.raises(RuntimeError, match="a bug in an action"):  # Pilot re-raises it
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            app.call_later(broken)  # run by the console's own loop, as a key's action is
            await pilot.pause()
    assert app.crashed and app.return_code == 1
    logged = [r for r in caplog.records if "unexpected error" in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # the traceback, in the log
    app._print_error_renderables()  # what `run` prints on leaving
    err = capsys.readouterr().err
    assert "the console stopped on an unexpected error" in err and "Traceback" not in err
