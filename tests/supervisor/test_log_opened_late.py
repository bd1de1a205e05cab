"""A console opened on a server that has served for hours: its log panel shows the present at
once, and the startup facts are this run's, however long the log file has grown."""

from __future__ import annotations

from pathlib import Path

from supervisor_helpers import fake_profile, free_port, ledger_empty

from vramtop.machines.live_machine import live_machine
from vramtop.machines.sampler import LATE_TAIL_BYTES
from vramtop.sources.logtail import MAX_READ_BYTES
from vramtop.supervisor import Supervisor

REQUEST = '(APIServer pid=7) INFO:     127.0.0.1:{} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'


def _serve_hours(log: Path, tag: str, size: int) -> None:
    """Append `size` bytes of request lines, each tagged, as hours of serving write them."""
    with open(log, "a") as out:
        n = 0
        while out.tell() < size:
            n += 1
            out.write(REQUEST.format(40000 + n % 20000).replace("OK", f"OK {tag}"))


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

        machine = live_machine(sup.profile, None, None, windows=False)
        try:
            sample = machine.sampler.tick()
            lines = machine.sampler.log_lines(0)
        finally:
            machine.sampler.close()
        # The present at once: not the run's first megabyte, a tick at a time.
        assert lines[-1].endswith("the newest line")
        assert all("earlier-run" not in line for line in lines)
        assert sum(len(line) + 1 for line in lines) <= LATE_TAIL_BYTES
        # This run's startup, read from where it began: not the log's first one.
        assert sample.startup is not None
        assert sample.startup.listen == f"http://127.0.0.1:{port}"
    finally:
        assert sup.stop().ok
