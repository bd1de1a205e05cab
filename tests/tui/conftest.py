"""Console tests: a fake backend on a fixed clock, and vramtop's files kept in a temp dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_backend import FakeBackend
from textual.pilot import Pilot

from vramtop.config import Settings
from vramtop.tui.app import VramtopApp

# Ticks are driven by the tests (`settle`), never by the wall clock.
NO_TIMER = Settings(interval_s=3600)


@pytest.fixture(autouse=True)
def vramtop_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NO_COLOR", raising=False)
    yield tmp_path / "home"


def make_app(backend: FakeBackend | None = None, settings: Settings | None = None) -> VramtopApp:
    backend = backend or FakeBackend()
    return VramtopApp(backend, settings or NO_TIMER, clock=backend.clock)


async def settle(pilot: Pilot[int]) -> None:
    """Let every worker finish and every message it posted be handled (actions tick again)."""
    app = pilot.app
    for _ in range(4):
        await app.workers.wait_for_complete()
        await pilot.pause()


async def ticks(pilot: Pilot[int], count: int) -> None:
    app = pilot.app
    assert isinstance(app, VramtopApp)
    for _ in range(count):
        app.request_tick()
        await app.workers.wait_for_complete()
        await pilot.pause()
