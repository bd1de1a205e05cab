"""The front door read each tick: the real door process (`python -m vramtop.frontdoor`) in
front of a small real upstream, read by `DoorReader` and by the sampler into the Sample's
`door`, recorded and read back; a door killed, or one that never answers, is None and never
an exception."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import threading
from pathlib import Path

import pytest

from tests.frontdoor.upstreams import upstream
from tests.support import http
from tests.support.door import real_door
from tests.support.ports import free_port
from tests.support.waiting import PROCESS_S, wait_until
from vramtop.core.model import DoorReading, GpuReading
from vramtop.core.snapshot import snapshot
from vramtop.machines.sampler import Sampler
from vramtop.session.session_reader import read_session
from vramtop.session.writer import SessionWriter, make_header
from vramtop.sources import door_reading
from vramtop.sources.door_reading import DoorReader

pytest.importorskip("aiohttp")


class NoGpu:
    name = "test"

    def read(self) -> GpuReading:
        return GpuReading(error="no GPU here")

    def close(self) -> None:
        pass


def test_the_doors_own_report_is_read_and_a_request_through_it_is_counted(
    tmp_path: Path,
) -> None:
    with upstream() as up, real_door(up, tmp_path) as (_proc, url):
        # A read past its 0.25 s is None (and the next few are skipped): here, where the
        # door's figures are the subject, a busy machine is given its time.
        reader = DoorReader(url, url.removeprefix("http://"), timeout_s=PROCESS_S)
        first = reader.read()
        assert first is not None
        assert (first.in_flight, first.held, first.served, first.holding) == (0, 0, 0, False)
        assert first.e2e_p50_s is None  # nothing measured yet
        answer = http.post(url + "/v1/completions", json={"prompt": "hi"}, timeout=10)
        assert answer.status_code == 200
        after = reader.read()
        assert after is not None and after.served == 1 and after.failed == 0
        assert after.e2e_p50_s is not None and after.e2e_p95_s is not None
        assert after.address == url.removeprefix("http://")
        reader.close()


def test_the_sampler_puts_the_door_in_its_sample_and_a_recording_keeps_it(
    tmp_path: Path,
) -> None:
    with upstream() as up, real_door(up, tmp_path) as (proc, url):
        address = url.removeprefix("http://")
        door = DoorReader(url, address, timeout_s=PROCESS_S)  # (as above)
        sampler = Sampler(probe=NoGpu(), url=None, door=door)
        http.post(url + "/v1/completions", json={"prompt": "hi"}, timeout=10)
        sample = sampler.tick()
        assert sample.door is not None and sample.door.served == 1
        # `--once --json`: an added `front_door` object with the same figures.
        front = snapshot(sample, wsl=False, demo=False)["front_door"]
        assert isinstance(front, dict) and front["served"] == 1 and front["address"] == address
        path = tmp_path / "rec.jsonl"
        with SessionWriter(path, make_header(started_at="2026-12-02T00:00:00Z")) as writer:
            writer.sample(sample)
            proc.send_signal(signal.SIGKILL)
            proc.wait(5)
            gone = sampler.tick()  # the door killed: no door this tick, and no exception
            assert gone.door is None
            writer.sample(gone)
        sampler.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert "door" in lines[1] and "door" not in lines[2]
    _header, records = read_session(path)
    assert [getattr(r, "door", "event") for r in records] == [sample.door, None]


def test_a_recording_without_door_fields_reads_as_no_door(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    with SessionWriter(path, make_header(started_at="2026-12-02T00:00:00Z")) as writer:
        writer.sample(Sampler(probe=NoGpu(), url=None).tick())
    assert "door" not in path.read_text()
    _header, records = read_session(path)
    assert [getattr(r, "door", "event") for r in records] == [None]


def test_a_door_that_never_answers_is_none_and_is_left_alone_for_a_few_reads() -> None:
    # A listener that accepts and never answers (a hung door): each connection is counted.
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    reader = DoorReader(f"http://127.0.0.1:{port}", f"127.0.0.1:{port}", timeout_s=0.1)
    try:
        readings = [reader.read() for _ in range(door_reading.SKIP_AFTER_TIMEOUT + 1)]
        assert readings == [None] * len(readings)
        # The accepting thread takes the connection when it next runs.
        wait_until(lambda: accepted, deadline_s=PROCESS_S, what="the door asked")
        assert len(accepted) == 1  # asked once, then left alone while it was skipped
        assert reader.read() is None
        # Asked again after the skipped reads.
        wait_until(lambda: len(accepted) == 2, deadline_s=PROCESS_S, what="the door asked again")
    finally:
        stop.set()
        thread.join(2)
        reader.close()
        for conn in accepted:
            conn.close()
        listener.close()


def test_nothing_listening_is_none() -> None:
    port = free_port()
    reader = DoorReader(f"http://127.0.0.1:{port}", f"127.0.0.1:{port}")
    assert reader.read() is None
    assert reader.read() is None  # a refused connection is not skipped: asked every tick
    reader.close()


def test_door_reading_is_a_value() -> None:
    reading = DoorReading(address="127.0.0.1:8000", in_flight=2)
    with pytest.raises(AttributeError):
        reading.in_flight = 3  # type: ignore[misc]
