"""A console opened on a server that has served for hours: its log panel shows the present at
once, and the startup facts are this run's, however long the log file has grown."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from supervisor_helpers import NoGpu, fake_profile, ledger_empty

from tests.support.ports import free_port
from vramtop.core.model import Sample
from vramtop.core.secrets import mask_line
from vramtop.machines import sampler as sampler_module
from vramtop.machines.live_machine import live_machine
from vramtop.machines.sampler import LOG_KEPT, Sampler
from vramtop.sources.logtail import MAX_READ_BYTES
from vramtop.supervisor import Supervisor

REQUEST = '(APIServer pid=7) INFO:     127.0.0.1:{} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
SCRAPE = '(APIServer pid=7) INFO:     127.0.0.1:{} - "GET /metrics HTTP/1.1" 200 OK\n'
STARTUP = Path(__file__).parents[1] / "fixtures" / "vllm-0.32-cpu" / "startup.log"


def _serve_hours(log: Path, tag: str, size: int, line: str = REQUEST) -> None:
    """Append `size` bytes of request lines, each tagged, as hours of serving write them."""
    with open(log, "a") as out:
        n = 0
        while out.tell() < size:
            n += 1
            out.write(line.format(40000 + n % 20000).replace("OK", f"OK {tag}"))


def _console_opened(sup: Supervisor) -> tuple[Sample, list[str]]:
    """A console's first reading of the profile's server, and the log lines it has."""
    machine = live_machine(sup.profile, None, None, windows=False)
    try:
        return machine.sampler.tick(), machine.sampler.log_lines(0)
    finally:
        machine.sampler.close()


def _started(ledger: Path, name: str) -> tuple[Supervisor, Path]:
    """A fake server started under profile `name`, and its log."""
    sup = Supervisor(
        fake_profile(name, free_port(), ledger), memory_released=lambda: ledger_empty(ledger)
    )
    assert sup.start(timeout_s=30).ok
    log = sup.log_path
    assert log is not None
    return sup, log


def test_a_long_log_shows_its_newest_lines_and_this_runs_startup(home: Path, ledger: Path) -> None:
    first_port, port = free_port(), free_port()
    first = Supervisor(fake_profile("late", first_port, ledger))
    assert first.start(timeout_s=30).ok
    assert first.stop().ok
    log = first.log_path
    assert log is not None
    _serve_hours(log, "earlier-run", 3 * MAX_READ_BYTES)
    # The same profile, now on another port: the log's first startup said the first port.
    sup = Supervisor(
        fake_profile("late", port, ledger), memory_released=lambda: ledger_empty(ledger)
    )
    assert sup.start(timeout_s=30).ok
    try:
        _serve_hours(log, "this-run", log.stat().st_size + 3 * MAX_READ_BYTES)
        with open(log, "a") as out:
            out.write("(APIServer pid=7) INFO the newest line\n")

        sample, lines = _console_opened(sup)
        # The present at once: not the run's first megabyte, a tick at a time.
        assert lines[-1].endswith("the newest line")
        assert all("earlier-run" not in line for line in lines)
        # Hours of requests fold into one row: this run's start shows above them, both
        # within what a console's first read takes, rather than a panel of one row.
        assert len(lines) <= LOG_KEPT
        starting = [i for i, line in enumerate(lines) if "Starting vLLM server on" in line]
        requests = [i for i, line in enumerate(lines) if "this-run" in line]
        assert starting and requests and starting[-1] < requests[0]
        assert len(requests) >= LOG_KEPT // 2
        # This run's startup, read from where it began: not the log's first one.
        assert sample.startup is not None
        assert sample.startup.listen == f"http://127.0.0.1:{port}"
    finally:
        assert sup.stop().ok


def test_an_idle_servers_long_log_shows_its_start(home: Path, ledger: Path) -> None:
    """Hours of nothing but scrapes (which the panel leaves out) after the start: the panel
    shows the start and what came since, not nothing."""
    sup, log = _started(ledger, "idle")
    try:
        _serve_hours(log, "idle", 2 * MAX_READ_BYTES, SCRAPE)
        with open(log, "a") as out:
            out.write("(APIServer pid=7) INFO the newest line\n")
        _serve_hours(log, "idle", log.stat().st_size + 100_000, SCRAPE)

        sample, lines = _console_opened(sup)
        assert any("Starting vLLM server on" in line for line in lines)
        assert lines[-1].endswith("the newest line")
        assert sample.startup is not None and sample.startup.listen is not None
    finally:
        assert sup.stop().ok


def test_a_long_log_of_lines_that_do_not_fold_shows_only_its_newest(
    home: Path, ledger: Path
) -> None:
    """Lines that each make a row fill the panel: the run's start is not put above them."""
    sup, log = _started(ledger, "busy")
    try:
        with open(log, "a") as out:
            n = 0
            while out.tell() < 2 * MAX_READ_BYTES:
                n += 1
                word = "".join("ghijklmnop"[int(d)] for d in str(n))
                out.write(f"(APIServer pid=7) INFO adapter {word} loaded\n")
        _sample, lines = _console_opened(sup)
        assert len(lines) == LOG_KEPT  # as many as a log read from its start keeps
        assert not any("Starting vLLM server on" in line for line in lines)
        assert lines[-1].endswith(f"adapter {word} loaded")
    finally:
        assert sup.stop().ok


def test_the_runs_start_is_read_once_for_its_facts_and_the_lines_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "server.log"
    shutil.copy(STARTUP, log)
    _serve_hours(log, "idle", 2 * MAX_READ_BYTES, SCRAPE)
    with open(log, "a") as out:
        out.write("(APIServer pid=7) INFO the newest line\n")
    reads: list[Any] = []
    read_section = sampler_module.read_section

    def counted(*args: Any) -> Any:
        reads.append(args)
        return read_section(*args)

    monkeypatch.setattr(sampler_module, "read_section", counted)
    path = log
    sampler = Sampler(probe=NoGpu(), url=None, log_path=lambda: path)
    sample = sampler.tick()
    # The start to where the server listens, above the newest line.
    text = STARTUP.read_bytes().decode()
    started = [mask_line(line.rstrip("\r")) for line in text.split("\n")]
    listen = next(i for i, line in enumerate(started) if "Starting vLLM server on" in line)
    expected = [*started[: listen + 1], "(APIServer pid=7) INFO the newest line"]
    assert sampler.log_lines(0) == expected
    assert sample.startup is not None and sample.startup.listen == "http://127.0.0.1:8011"
    assert len(reads) == 1  # one read of the start for both
    # The same run's log opened again (another file): its facts are kept, its start shown.
    path = tmp_path / "again.log"
    shutil.copy(log, path)
    sample = sampler.tick()
    assert sampler.log_lines(0) == expected
    assert sample.startup is not None and sample.startup.listen == "http://127.0.0.1:8011"
    assert len(reads) == 2
