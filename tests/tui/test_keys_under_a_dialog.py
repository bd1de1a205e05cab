"""Keys typed ahead of a dialog (the quit question answered, a dialog closing) never crash
the console: each is done on the screen it lands on, or, once the console is quitting,
not at all."""

from __future__ import annotations

import pytest
from textual import events

from tests.support.console import make_app, settle, ticks
from tests.support.fake_backend import FakeBackend
from vramtop.core.keymap import DEFAULT_KEYS
from vramtop.tui.app import VramtopApp

# What a terminal sends for each key: keys typed faster than the screens change arrive
# together, as these are posted here (Pilot's press waits for each key's screen).
CHARACTERS = {"escape": None, "enter": "\r", "slash": "/", "question_mark": "?", "space": " "}
KEYS = sorted(set(DEFAULT_KEYS.values()))


def typed(app: VramtopApp, *keys: str) -> None:
    for key in keys:
        app.post_message(events.Key(key, CHARACTERS.get(key, key if len(key) == 1 else None)))


@pytest.mark.parametrize("answer", ["l", "s"])
@pytest.mark.parametrize("key", KEYS)
async def test_a_key_typed_after_the_quit_answer(answer: str, key: str) -> None:
    # Seen: q, l, then e at once raised "NoMatches #timeline": the timeline was opened on a
    # console already taking its screens down.
    app = make_app(FakeBackend())
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        typed(app, "q", answer, key)
        await settle(pilot)
    assert app.return_code == 0


@pytest.mark.parametrize("key", KEYS)
async def test_a_key_typed_as_the_quit_dialog_closes(key: str) -> None:
    app = make_app(FakeBackend())
    async with app.run_test(size=(100, 30)) as pilot:
        await ticks(pilot, 1)
        typed(app, "q", "escape", key)
        await settle(pilot)
        assert app.is_running
