"""The README's picture of the console is drawn by the app itself (`python -m docs.screenshot`)
and is the console as it is now: a change to the screen that forgets to draw it again fails."""

from __future__ import annotations

from pathlib import Path

from docs import screenshot


async def test_the_script_draws_the_collapse(tmp_path: Path) -> None:
    out = tmp_path / "images" / "console.svg"
    svg = await screenshot.render(out)
    assert out.read_text(encoding="utf-8") == svg
    assert svg.startswith("<svg") and "</svg>" in svg
    words = svg.replace("&#160;", " ").replace("&#x27;", "'")
    assert "The desktop is squeezing vLLM's memory" in words  # the collapse's banner
    assert "relaunch at" in words  # and its remedy's key
    assert svg == screenshot.OUT.read_text(encoding="utf-8"), (
        "docs/images/console-collapse.svg is not the console as it is now: run "
        "`python -m docs.screenshot` and commit the picture"
    )
