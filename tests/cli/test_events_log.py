"""The lasting timeline's file: bounded and rotated, damaged lines skipped, written 0600 and
never through a link."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from vramtop.core.findings import Finding
from vramtop.event_log import EventLog, path_for
from vramtop.session.finding_events import before_and_since, record_findings


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_each_profile_has_its_log_in_the_state_directory_written_0600(home: Path) -> None:
    log = EventLog.for_profile("qwen/27b")
    assert log.append(1_000.0, "start", {"result": "ok", "asked_by": "key"})
    assert log.path == home / "state" / "events-qwen_27b.jsonl" == path_for("qwen/27b")
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    assert json.loads(log.path.read_text()) == {
        "t": 1000.0,
        "event": "start",
        "detail": {"result": "ok", "asked_by": "key"},
    }


def test_it_is_bounded_and_rotated_to_one_earlier_file(home: Path) -> None:
    log = EventLog(home / "events.jsonl", max_bytes=2_000)
    home.mkdir(parents=True)
    for i in range(200):
        assert log.append(float(i), "finding", {"kind": "vram_contention", "n": i})
    assert log.path.stat().st_size <= 2_000
    assert log.rotated.stat().st_size <= 2_000
    assert not log.path.with_name("events.jsonl.2").exists()
    kept = log.read()
    # The newest events, oldest first, with none lost between the two files.
    numbers = [e.detail["n"] for e in kept]
    assert numbers == list(range(numbers[0], 200))
    assert 20 < len(numbers) < 200
    assert stat.S_IMODE(log.rotated.stat().st_mode) == 0o600


def test_a_damaged_line_is_skipped_and_counted_not_a_crash(home: Path) -> None:
    log = EventLog.for_profile("p")
    log.append(1.0, "start", {})
    with log.path.open("ab") as f:
        f.write(b'{"t": 2.0, "event": "stop", "deta\n')  # cut half-way (a crash mid-write)
        f.write(b"\xff\xfe not json\n")
        f.write(b'{"t": "soon", "event": "x", "detail": {}}\n')
        f.write(b'{"t": NaN, "event": "x", "detail": {}}\n')
        f.write(b"[1, 2]\n")
        f.write(b'{"t": 1e300, "event": "x", "detail": {}}\n')  # no calendar shows it
        f.write(b'{"t": -5, "event": "x", "detail": {}}\n')
    log.append(3.0, "relaunch", {"result": "ok"})
    assert [(e.t, e.name) for e in log.read()] == [(1.0, "start"), (3.0, "relaunch")]
    assert log.skipped == 7
    assert [e.name for e in log.read(since=2.0)] == ["relaunch"]


def test_a_link_in_its_place_is_not_written_through(home: Path, tmp_path: Path) -> None:
    log = EventLog.for_profile("p")
    log.path.parent.mkdir(parents=True, exist_ok=True)
    target = tmp_path / "elsewhere"
    target.write_text("mine\n")
    log.path.symlink_to(target)
    assert not log.append(1.0, "start", {})
    assert log.error is not None and "symbolic link" in log.error
    assert target.read_text() == "mine\n"


def test_findings_opened_and_closed_are_written_for_the_actor(home: Path) -> None:
    log = EventLog.for_profile("p")
    finding = Finding(
        kind="vram_contention",
        severity="critical",
        first_seen_t=10.0,
        last_seen_t=70.0,
        closed_t=None,
        summary="squeezed",
    )
    from dataclasses import replace

    assert record_findings(log, 1_000.0, opened=[finding]) == 1
    assert record_findings(log, 1_060.0, closed=[replace(finding, closed_t=70.0)]) == 1
    opened, closed = log.read()
    assert opened.detail == {
        "kind": "vram_contention",
        "change": "opened",
        "summary": "squeezed",
        "severity": "critical",
        "id": "vram_contention@10.000",
    }
    assert closed.detail["change"] == "closed" and closed.detail["duration_s"] == 60.0
    assert before_and_since(log.read(), 1_030.0) == ([opened], [closed])
    assert before_and_since(log.read(), 1_030.0, limit=0) == ([], [])


def test_two_writers_at_once_leave_no_damaged_line(home: Path) -> None:
    # A guard and a console's key write the same profile's log: each line whole, the bound kept.
    import subprocess
    import sys

    home.mkdir(parents=True)
    path = home / "shared.jsonl"
    writer = (
        "import sys\n"
        "from pathlib import Path\n"
        "from vramtop.event_log import EventLog\n"
        "log = EventLog(Path(sys.argv[1]), max_bytes=20_000)\n"
        "for i in range(400):\n"
        "    assert log.append(float(i), 'finding', {'by': sys.argv[2], 'n': i, 'pad': 'x' * 40})\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(path), who]) for who in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    log = EventLog(path, max_bytes=20_000)
    kept = log.read()
    assert log.skipped == 0
    assert path.stat().st_size <= 20_000 and log.rotated.stat().st_size <= 20_000
    # The newest events are kept (one writer may have finished before the other began).
    assert [e.detail["n"] for e in kept].count(399) >= 1
    for who in ("a", "b"):
        numbers = [e.detail["n"] for e in kept if e.detail["by"] == who]
        assert numbers == list(range(numbers[0], 400)) if numbers else True
