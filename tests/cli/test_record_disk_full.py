"""A recording on a full disk fails and says so; the live view it records goes on. The full
disk is the kernel's own: /dev/full answers every write with ENOSPC."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vramtop.core.model import GpuReading, Sample, ServerInfo, ServerState
from vramtop.session.live import LiveSession
from vramtop.session.session_reader import read_session
from vramtop.session.writer import SessionWriter, make_header

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")


def sample(t: float) -> Sample:
    return Sample(
        t=t, gpu=GpuReading(error="no GPU here"), info=ServerInfo(state=ServerState.RUNNING)
    )


def test_a_full_disk_ends_the_recording_with_its_reason_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "session.jsonl"
    writer = SessionWriter(path, make_header(started_at="2026-12-01T00:00:00Z"))
    session = LiveSession(writer)
    session.observe(sample(0.0))
    kept = writer._file
    assert kept is not None
    kept.close()
    writer._file = open("/dev/full", "w", encoding="utf-8")  # noqa: SIM115 - the disk fills up
    for t in range(1, 6):
        session.observe(sample(float(t)))  # never raises: the live view goes on
    assert writer.failed is not None and "No space" in writer.failed
    assert session.recording_error is not None and str(path) in session.recording_error
    failed = [e for e in session.events() if e.name == "recording_failed"]
    assert len(failed) == 1 and failed[0].t == 1.0
    assert not session.recording  # nothing more is written
    session.close()
    # What was written before the disk filled stays readable.
    _header, records = read_session(path)
    assert [type(r).__name__ for r in records].count("Sample") == 1
