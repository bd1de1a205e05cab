"""The console's recording option: `vramtop --demo --record FILE` writes a session file that
`vramtop diagnose` reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vramtop.cli import build_parser
from vramtop.commands import monitor
from vramtop.core.server_events import Event
from vramtop.machines.demo_world import stop_demo_world
from vramtop.session.session_reader import read_session


def test_console_records_its_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("VRAMTOP_SIM_STARTUP_S", "0.3")
    session = tmp_path / "console.jsonl"
    seen: dict[str, object] = {}

    def fake_console(backend, settings):  # type: ignore[no-untyped-def]
        # Stands in for the screen: tick as the console would, then leave stopping vLLM.
        seen["interval"] = settings.interval_s
        backend.start()
        for _ in range(6):
            backend.tick()
        backend.close(stop_server=True)
        return 0

    monkeypatch.setattr("vramtop.tui.app.run_console", fake_console)
    args = build_parser().parse_args(["--demo", "--interval", "0.5", "--record", str(session)])
    try:
        assert monitor.run(args) == 0
    finally:
        stop_demo_world()
    assert seen["interval"] == 0.5
    header, records = read_session(session)
    assert header.server is not None
    events = [r.name for r in records if isinstance(r, Event)]
    assert "start" in events or "ready" in events
    assert "stop" in events  # leaving with "stop vLLM" is a planned stop, recorded
    lines = session.read_text().splitlines()
    assert all(json.loads(line) for line in lines)  # every line complete


def test_unwritable_record_path_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("VRAMTOP_SIM_STARTUP_S", "0.3")
    monkeypatch.setattr("vramtop.tui.app.run_console", lambda *_: 0)  # must not be reached
    # a directory cannot be written as a session file
    args = build_parser().parse_args(["--demo", "--record", str(tmp_path)])
    try:
        assert monitor.run(args) == 2
    finally:
        stop_demo_world()
    assert "cannot record" in capsys.readouterr().err
