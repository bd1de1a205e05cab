"""`vramtop events`: the lasting timeline as JSON (a contract) and as a table; --since as an
ISO time or a duration; bad input is a message and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from vramtop import cli
from vramtop.commands.events import since_time
from vramtop.event_log import EventLog


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _three_hours(now: float) -> None:
    log = EventLog.for_profile("demo")
    log.append(now - 3 * 3600, "start", {"result": "ok", "asked_by": "command", "message": "x"})
    log.append(
        now - 3600,
        "relaunch",
        {"gpu_memory_utilization": 0.85, "result": "ok", "asked_by": "guard", "message": "ok"},
    )
    log.append(now - 60, "finding", {"kind": "vram_contention", "change": "opened", "summary": "s"})


def test_events_json_shape(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    now = time.time()
    _three_hours(now)
    assert cli.main(["events", "--demo", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["events"]
    assert [list(e) for e in out["events"]] == [["t", "event", "detail"]] * 3
    relaunch = out["events"][1]
    assert relaunch["event"] == "relaunch"
    assert relaunch["detail"]["gpu_memory_utilization"] == 0.85
    assert relaunch["detail"]["result"] == "ok" and relaunch["detail"]["asked_by"] == "guard"
    # wall clock: the moment this test wrote, read back (a timestamp, not a duration).
    assert abs(relaunch["t"] - (now - 3600)) < 1


def test_since_a_duration_or_an_iso_time(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    now = time.time()
    _three_hours(now)
    assert cli.main(["events", "--demo", "--json", "--since", "2h"]) == 0
    names = [e["event"] for e in json.loads(capsys.readouterr().out)["events"]]
    assert names == ["relaunch", "finding"]
    iso = datetime.fromtimestamp(now - 600).isoformat(timespec="seconds")
    assert cli.main(["events", "--demo", "--json", "--since", iso]) == 0
    assert [e["event"] for e in json.loads(capsys.readouterr().out)["events"]] == ["finding"]
    assert since_time("90s", now=1000.0) == 910.0
    assert since_time("1d", now=100_000.0) == 13_600.0
    assert since_time("2026-12-01T14:00:00+00:00") == 1_796_133_600.0


def test_the_table_reads_in_words(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _three_hours(time.time())
    assert cli.main(["events", "--demo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["time", "event", "asked", "by", "what"]
    assert "guard" in lines[2] and "budget 0.85 · served" in lines[2]
    assert "vram_contention opened: s" in lines[3]


def test_the_first_request_served_after_a_step_reads_in_words(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = time.time()
    log = EventLog.for_profile("demo")
    log.append(now - 60, "restart", {"result": "ok", "asked_by": "key", "message": "x"})
    served = {"step": "restart", "step_t": now - 60, "first_served_s": 1.234}
    log.append(now - 59, "first_served", served)
    assert cli.main(["events", "--demo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "first_served" in lines[2].split()
    assert lines[2].endswith("the first request served 1.23 s after the restart's release")


@pytest.mark.parametrize("bad", ["yesterday", "2h ago", "-5m", "99999999999d", "2026-13-01"])
def test_a_bad_since_is_a_message_and_exit_2(
    home: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["events", "--demo", "--since", bad])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--since" in err and "Traceback" not in err


def test_no_profile_is_a_message_and_exit_2(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["events", "--profile", "nope"]) == 2
    assert "no profile named 'nope'" in capsys.readouterr().err
    # A profile removed since keeps its timeline, read by its name.
    EventLog.for_profile("gone").append(1.0, "stop", {"result": "ok"})
    assert cli.main(["events", "--profile", "gone", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["events"][0]["event"] == "stop"


def test_no_events_yet(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["events", "--demo"]) == 0
    assert "no events for profile demo yet" in capsys.readouterr().out
    assert cli.main(["events", "--demo", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"events": []}


def test_a_guard_event_shows_its_decision_and_why_shortened_to_the_width(home: Path) -> None:
    from vramtop.commands.events import table
    from vramtop.core.server_events import Event

    why = "no moment without a request running in 120 s, and no front door holds them " * 3
    events = [
        Event(
            time.time(),
            "guard",
            {
                "decision": "skipped",
                "why": why.strip(),
                "policy": "adaptive",
                "step": "down",
                "gpu_memory_utilization": 0.85,
            },
        ),
        Event(time.time(), "guard", {"decision": "cancelled", "why": "a relaunch (key) was asked"}),
    ]
    lines = table(events, width=100)
    assert "skipped (down) · budget 0.85 · no moment without a" in lines[1]
    assert len(lines[1]) == 100 and lines[1].endswith("…")  # shortened to the width
    assert lines[2].endswith("cancelled · a relaunch (key) was asked")  # whole where it fits
    wide = table(events, width=400)
    assert wide[1].endswith("front door holds them")


def test_a_pipe_gets_whole_lines(home: Path) -> None:
    # Read by a script or a pager through a pipe: never cut to a terminal's width, even
    # where COLUMNS names one (the width a terminal would have).
    why = "no moment without a request running in 120 s, and no front door holds them " * 3
    EventLog.for_profile("demo").append(
        time.time(), "guard", {"decision": "skipped", "why": why.strip()}
    )
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": os.getcwd()}
    done = subprocess.run(
        [sys.executable, "-m", "vramtop", "events", "--demo"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    line = done.stdout.splitlines()[1]
    assert line.endswith(f"skipped · {why.strip()}") and "…" not in line


def test_since_that_leaves_only_older_events_says_so(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _three_hours(time.time())
    assert cli.main(["events", "--demo", "--since", "30s"]) == 0
    out = capsys.readouterr().out
    assert "no events for profile demo since " in out
    assert "3 older events kept (drop --since to see them)" in out and "yet" not in out
    assert cli.main(["events", "--demo", "--json", "--since", "30s"]) == 0
    assert json.loads(capsys.readouterr().out) == {"events": []}  # the contract as it was


def test_a_log_of_damaged_lines_alone_is_not_called_empty(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = EventLog.for_profile("demo").path
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text('{"t": "x"}\nnot json\n')
    assert cli.main(["events", "--demo"]) == 0
    captured = capsys.readouterr()
    assert "2 damaged line(s)" in captured.err
    assert "no readable events for profile demo" in captured.out and "yet" not in captured.out
