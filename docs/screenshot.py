"""Render the console in a collapse, from the app itself: docs/images/console-collapse.svg.

Run from the repository root: `python -m docs.screenshot` (or `--out PATH`). It plays the field
report's machine as the snapshot tests do (tests/support/fake_backend.py: a 32 GB card under
WSL2, a 27B model at 0.93, a seeded stream and a fake clock, so two runs draw the same frame),
lets the console learn its normal rate, starts the simulated video call (`v`) and saves the
screen once the collapse's banner is up. Run it again after a change to the console, so the
README's picture never goes stale.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from textual.pilot import Pilot

from tests.support.console import make_app, settle, ticks
from tests.support.fake_backend import FakeBackend
from vramtop.tui.widgets.finding_banner import FindingBanner

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images" / "console-collapse.svg"
SIZE = (120, 36)
LEARN_TICKS = 24  # seconds of healthy decoding before the call: the normal rate is learned
CALL_TICKS = 6  # seconds into the call: the collapse is named
TITLE = "vramtop: a video call collapses vLLM"


async def render(out: Path) -> str:
    """Drive the console into the collapse and write its screen to `out` as SVG."""
    app = make_app(FakeBackend())
    async with app.run_test(size=SIZE) as pilot:
        await _collapse(pilot)
        banner = app.query_one(FindingBanner)
        if not banner.display:
            raise SystemExit("no collapse was shown: the picture would not show one")
        svg = app.export_screenshot(title=TITLE)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(svg, encoding="utf-8")
    return svg


async def _collapse(pilot: Pilot[int]) -> None:
    await ticks(pilot, LEARN_TICKS)
    await pilot.press("v")
    await ticks(pilot, CALL_TICKS)
    await settle(pilot)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m docs.screenshot", description=__doc__)
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write (default {OUT})")
    args = parser.parse_args(argv)
    asyncio.run(render(args.out))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
