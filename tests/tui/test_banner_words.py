"""A finding's words are never cut: the banner wraps, at 80×24 and at 120×40, compact and
with its details (`d`)."""

from __future__ import annotations

import pytest

from tests.support.console import make_app, open_finding, settle, status_line, ticks, toggle_call
from tests.support.fake_backend import FakeBackend
from vramtop.core.findings import Ladder, Remedy
from vramtop.tui.app import VramtopApp
from vramtop.tui.widgets.finding_banner import FindingBanner

SUMMARY = (
    "Generation fell to 6.4 tok/s per request (5 % of the normal 120) while the desktop took "
    "the card's headroom: the desktop is squeezing vLLM's memory and its buffers moved out."
)
LADDER = Ladder(
    observed=(
        "card full (31.9 of 31.8 GiB), desktop share +3.2 GiB beyond its allowance, tokens/s "
        "120 → 6.4, KV usage 1.7 %, no throttling, no preemption",
    ),
    inferred=("contention for physical VRAM with the desktop, not a bigger load",),
    hypothesis=("serving memory lost residency and is read over PCIe from system memory",),
)
WHY = (
    "a budget of 0.85 leaves the desktop 4.8 GiB, its peak during the call plus a margin, "
    "and keeps 118,000 tokens of KV pool"
)


def _screen_words(app: VramtopApp) -> str:
    """Every word the screen shows, in order, lines joined."""
    strips = app.screen._compositor.render_strips()
    return " ".join(" ".join(strip.text.replace("█", " ") for strip in strips).split())


def _words(text: str) -> str:
    return " ".join(text.split())


def _long_ladder() -> Ladder:
    """LADDER with six observed lines: details longer than an 80x24 banner's room."""
    return Ladder(
        observed=tuple(f"{i}: {LADDER.observed[0]}" for i in range(6)),
        inferred=LADDER.inferred,
        hypothesis=LADDER.hypothesis,
    )


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_banner_wraps_every_word_of_the_finding(size: tuple[int, int]) -> None:
    backend = FakeBackend()
    backend._findings = [open_finding(summary=SUMMARY, ladder=LADDER, remedy=Remedy(0.85, why=WHY))]
    app = make_app(backend)
    async with app.run_test(size=size) as pilot:
        await ticks(pilot, 2)
        shown = _screen_words(app)
        assert _words(SUMMARY) in shown  # the compact form: the whole sentence
        assert "…" not in shown.split("VRAM split")[0]
        await pilot.press("d")
        await settle(pilot)
        shown = _screen_words(app)
        assert _words(SUMMARY) in shown
        for name, sentences in LADDER.rungs():
            assert f"{name}: {_words(sentences[0])}" in shown
        assert f"remedy: {_words(WHY)}" in shown
        # The keys are still on screen below the details, and so is the VRAM panel.
        assert "d fewer details" in shown and "e events" in shown
        assert "vLLM 30.1" in shown
        await pilot.press("d")
        await settle(pilot)
        assert "generation" in _screen_words(app)  # closed: the panels are back


async def test_details_longer_than_the_room_scroll_with_the_keys() -> None:
    long_ladder = _long_ladder()
    backend = FakeBackend()
    backend._findings = [
        open_finding(summary=SUMMARY, ladder=long_ladder, remedy=Remedy(0.85, why=WHY))
    ]
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 2)
        await pilot.press("d")
        await settle(pilot)
        banner = app.query_one(FindingBanner)
        assert banner.has_focus and banner.max_scroll_y > 0
        assert "scroll the finding's details" in _screen_words(app)
        assert WHY.split()[-1] not in _screen_words(app).split("remedy:")[-1]
        await pilot.press("pagedown", "pagedown", "pagedown")
        await pilot.pause()
        assert f"remedy: {_words(WHY)}" in _screen_words(app)  # scrolled to: every word
        await pilot.press("d")
        await settle(pilot)
        assert not banner.has_focus


async def test_numbers_its_rule_no_longer_refreshes_are_told_with_their_age() -> None:
    """A finding held open without a refresh (the squeeze eased, not yet closed) keeps the
    numbers of when it last held: the banner says how old they are, not that they hold now."""
    backend = FakeBackend()
    backend._findings = [open_finding(summary=SUMMARY)]
    app = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await ticks(pilot, 5)
        assert "numbers as of" not in _screen_words(app)  # refreshed on each sample
        backend.refreshed = False  # from here on its rule holds it open without a refresh
        with backend._lock:
            backend._findings = [open_finding(summary=SUMMARY)]  # last refreshed at t=0
        await ticks(pilot, 2)
        age = app.query_one(FindingBanner).text.splitlines()[0]
        assert f"(numbers as of {backend.t:.0f} s ago)" in age, age
        assert _words(SUMMARY) in _screen_words(app)


async def test_details_open_when_the_finding_closes_give_the_keys_back() -> None:
    """`d` opened long details (the arrows scroll them, the status line says so); the finding
    closes: the status line stops saying it and the banner lets the focus go."""
    long_ladder = _long_ladder()
    backend = FakeBackend()
    backend._findings = [
        open_finding(summary=SUMMARY, ladder=long_ladder, remedy=Remedy(0.85, why=WHY))
    ]
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 2)
        await pilot.press("d")
        await settle(pilot)
        banner = app.query_one(FindingBanner)
        assert banner.has_focus and "scroll the finding's details" in _screen_words(app)
        with backend._lock:
            backend._findings = []
        await ticks(pilot, 2)
        await settle(pilot)
        assert not banner.has_focus
        assert "scroll the finding's details" not in _screen_words(app)


async def test_closing_the_details_takes_only_their_words_off_the_status_line() -> None:
    # Closing them cleared the status line whatever it said by then (a call started).
    long_ladder = Ladder(observed=tuple(f"{i}: {LADDER.observed[0]}" for i in range(6)))
    backend = FakeBackend()
    backend._findings = [open_finding(summary=SUMMARY, ladder=long_ladder)]
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await ticks(pilot, 2)
        await pilot.press("d")
        await settle(pilot)
        assert "scroll the finding's details" in status_line(app)
        await toggle_call(pilot)
        await settle(pilot)
        assert status_line(app) == "simulated call started"
        await pilot.press("d")
        await settle(pilot)
        assert status_line(app) == "simulated call started"
