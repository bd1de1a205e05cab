"""The footer's keys are built again only when what they show changed: an ask that changes
nothing (a focus moved, the console refreshing its keys) keeps the keys drawn."""

from __future__ import annotations

from textual.pilot import Pilot
from textual.widgets._footer import FooterKey

from tests.support.console import make_app, ticks
from tests.support.waiting import PROCESS_S, wait_until_async
from vramtop.tui.widgets.console_footer import ConsoleFooter


async def _refreshed(pilot: Pilot[int]) -> None:
    """Once what was asked to happen after the next frame (the footer's build) is done."""
    done: list[bool] = []
    pilot.app.call_after_refresh(lambda: done.append(True))
    pilot.app.screen.refresh()
    await wait_until_async(
        lambda: done, deadline_s=PROCESS_S, what="the next frame", pause=pilot.pause
    )


def _keys(footer: ConsoleFooter) -> list[FooterKey]:
    return list(footer.query(FooterKey))


async def test_the_footer_keeps_its_keys_until_what_they_show_changes() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        footer = app.query_one(ConsoleFooter)
        await _refreshed(pilot)
        drawn = _keys(footer)
        assert "Budget" in [key.description for key in drawn]
        assert all(key.has_class("-compact") for key in drawn)  # Textual's compact footer

        for _ in range(3):
            app.refresh_bindings()
        app.screen.focus_next()
        await _refreshed(pilot)
        assert _keys(footer) == drawn  # the very same widgets: nothing was built again

        app.set_keymap({"relaunch": "x"})  # a key moved: the footer says so
        await _refreshed(pilot)
        budget = [key for key in _keys(footer) if key.description == "Budget"]
        assert [key.key_display for key in budget] == ["x"]
