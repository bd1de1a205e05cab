"""With a finding open the main screen stays within the terminal at 80x24 and 120x40: the
footer (and, while the details are closed, the log) on screen, the finding's words all there
to read (scrolled, or shown whole by d), none cut. At 80x24 a banner of four lines pushed the
log and the footer below the screen."""

from __future__ import annotations

import pytest
from textual.widgets import Footer

from tests.support.console import make_app, open_finding, settle, ticks
from tests.support.fake_backend import FakeBackend
from vramtop.core.findings import Finding, Ladder
from vramtop.core.remedy import Remedy
from vramtop.tui.app import VramtopApp
from vramtop.tui.widgets.finding_banner import FindingBanner
from vramtop.tui.widgets.server_log import ServerLog

WORDY = (
    "the card is 100% full (32,590 of 32,607 MiB); the desktop's share grew by 2.95 GiB "
    "since the start; KV cache usage is 4.8%, which rules out cache saturation; no thermal "
    "or hardware clock slowdown reported at 56 °C; PCIe RX 12 GB/s while decoding"
)


class _Wordy(FakeBackend):
    """A collapse told at length, as the demo's field report tells it."""

    def findings(self) -> list[Finding]:
        return [
            open_finding(
                summary="Generation fell to 8.1 tok/s per request (10% of the normal 82) with "
                "KV cache at 6.3% and the card 100% full: the desktop is squeezing vLLM's "
                "memory, and every request waits on it.",
                ladder=Ladder(
                    observed=(WORDY, WORDY.replace("card", "board")),
                    inferred=("the desktop and vLLM are competing for physical VRAM " * 3,),
                    hypothesis=("vLLM decodes from host memory over PCIe " * 3,),
                ),
                remedy=Remedy(action="relaunch", budget=0.83, why="leaves the desktop its peak"),
            )
        ]


def _off_screen(app: VramtopApp, height: int) -> list[str]:
    """The main screen's widgets drawn (partly) below the terminal's last row."""
    return [
        f"{type(widget).__name__} {widget.region}"
        for widget in app.screen.query("*")
        if widget.display and widget.region.height and widget.region.bottom > height
    ]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_an_open_finding_keeps_the_footer_on_screen(size: tuple[int, int]) -> None:
    app = make_app(_Wordy())
    width, height = size
    async with app.run_test(size=size) as pilot:
        await ticks(pilot, 2)
        banner = app.query_one(FindingBanner)
        assert banner.display and "squeezing" in banner.text
        footer = app.query_one(Footer)
        for details in (False, True):
            if details:
                await pilot.press("d")
                await settle(pilot)
                await pilot.pause()
                for line in (WORDY, "competing for physical VRAM"):
                    assert line in " ".join(banner.text.split()), banner.text  # none lost
            assert not _off_screen(app, height), (details, _off_screen(app, height))
            assert footer.region.y == height - 1 and footer.region.width == width
            if not details:
                assert app.query_one(ServerLog).region.height > 0  # the log, in the rows left
