"""One sampling tick: read every source once and assemble a `Sample`.

The sampler owns no policy: it asks the GPU probe, the scraper, the server's log file and the
supervisor, and hands the values to the core (split, timeline). It blocks for at most the
scrape timeout; the console calls it from a thread worker.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from itertools import islice
from pathlib import Path
from typing import Protocol

from vramtop.core.budget import outside_budget
from vramtop.core.counter_window import CounterWindow
from vramtop.core.log_rows import FoldedRows
from vramtop.core.model import (
    Sample,
    ServerInfo,
    ServerReading,
    ServerState,
    Split,
    StartupFacts,
    StatsLine,
)
from vramtop.core.secrets import mask_line
from vramtop.core.snapshot import server_util
from vramtop.core.split import split_card, split_from_windows
from vramtop.core.vllm.log import StartupParser, is_poll_access_line, parse_stats_line
from vramtop.core.windows.reading import WindowsGpuReading
from vramtop.machines.interface import LOG_KEPT
from vramtop.sources.door_reading import DoorReader
from vramtop.sources.logtail import LogTail, last_lines, read_section
from vramtop.sources.probes import GpuProbe
from vramtop.sources.scraper import Scraper

log = logging.getLogger(__name__)

START_MARKER = "=== vramtop: start"
# A log longer than this when first opened (a console opened on a server that has served for
# hours) is read from its end: the lines before it are read back, to LOG_KEPT that show
# and at most LATE_BACK_BYTES (an idle server's log is mostly polling, which does not show) ...
LATE_LOG_BYTES = 128 * 1024
LATE_BACK_BYTES = 1024 * 1024
# ... and the start of the server's run for its startup facts, to the end of the startup and
# at most this much (vLLM's startup output is some 20-100 KB).
LATE_STARTUP_BYTES = 256 * 1024
# ... and shown above the last lines when these make fewer rows than a tall log panel shows
# (repeated lines fold into one row: hours of requests are a row or two).
LATE_ROWS = 40


class WindowsSource(Protocol):
    """The Windows side under WSL2 (PowerShell counters, or the simulator's)."""

    def read(self) -> WindowsGpuReading: ...

    def close(self) -> None: ...


class Sampler:
    """Sources in, samples out. `info` and `log_path` are asked each tick (they change on
    restart), `log_start` (where in that file the server's run began) when a log is opened;
    `clock` is injectable so tests and replays control time."""

    def __init__(
        self,
        *,
        probe: GpuProbe,
        url: str | None,
        api_key: str | None = None,
        info: Callable[[], ServerInfo | None] = lambda: None,
        log_path: Callable[[], Path | None] = lambda: None,
        log_start: Callable[[], int] = lambda: 0,
        clock: Callable[[], float] = time.monotonic,
        timeout_s: float = 2.0,
        windows: WindowsSource | None = None,
        door: DoorReader | None = None,
    ) -> None:
        """`door`: the profile's front door, read each tick beside vLLM (which `url` reads
        behind it, on its loopback port)."""
        self._probe = probe
        self.windows = windows
        self.door = door
        self._scraper = (
            Scraper(url, api_key=api_key, timeout_s=timeout_s, clock=self.now) if url else None
        )
        self._info = info
        self._log_path = log_path
        self._log_start = log_start
        self._clock = clock
        self._t0 = clock()
        self.timeline = CounterWindow()
        self._tail: LogTail | None = None
        self._startup = StartupParser()
        self._started_at: float | None = None
        self._stats: StatsLine | None = None
        self._lines: deque[str] = deque(maxlen=LOG_KEPT)

    @property
    def url(self) -> str | None:
        return self._scraper.url if self._scraper else None

    def now(self) -> float:
        """Seconds since this sampler started: the `t` of samples and events."""
        return self._clock() - self._t0

    def tick(self, outside_budget_bytes: int | None = None) -> Sample:
        """`outside_budget_bytes`: what the server was measured to hold beyond its budget
        (the diagnosis learns it; the estimate when None): the split's desktop headroom counts
        it, as the what-ifs do."""
        # The server first, and the sample's time that of its /metrics page: rates divide the
        # counters' increase by the time between two ticks' reads of them, whatever else a
        # tick waits on (the GPU library's first read, a first tick on a busy thread, the
        # /health, /version and /v1/models a read asks for after the page).
        server = self._scraper.read_sync() if self._scraper else None
        t = self.now()
        if self._scraper is not None and self._scraper.metrics_read_at is not None:
            t = self._scraper.metrics_read_at
        gpu = self._probe.read()
        info = self._info()
        startup = self._read_log(info)
        sample = Sample(
            t=t,
            gpu=gpu,
            server=server,
            info=info,
            startup=startup,
            stats=self._stats,
            windows=self.windows.read() if self.windows is not None else None,
            door=self.door.read() if self.door is not None else None,
        )
        split = self._split(sample, outside_budget(outside_budget_bytes))
        return self.timeline.add(replace(sample, split=split))

    def close(self) -> None:
        self._probe.close()
        if self.windows is not None:
            self.windows.close()
        if self._scraper is not None:
            self._scraper.close()
        if self.door is not None:
            self.door.close()

    def log_lines(self, limit: int = 500) -> list[str]:
        lines = self._lines
        if not limit or limit >= len(lines):
            return list(lines)
        # The last `limit` only: the console asks every tick, and the log keeps thousands.
        return list(islice(lines, len(lines) - limit, None))

    def _read_log(self, info: ServerInfo | None) -> StartupFacts | None:
        path = self._log_path()
        if path != (self._tail.path if self._tail is not None else None):
            # Another server's output (an attached one's own file, or none that can be read):
            # the lines kept so far were the previous server's, not this one's.
            if self._tail is not None:
                self._tail.close()
            self._tail = None
            self._lines.clear()
        if path is None:
            return None
        opened = self._tail is None
        if self._tail is None:
            self._tail = LogTail(path)
        started_at = info.started_at if info else None
        if started_at != self._started_at:
            # A new server start: its startup facts replace the previous server's.
            self._started_at = started_at
            self._startup = StartupParser()
            self._stats = None
        if opened:
            self._open_late(self._tail)
        for raw in self._tail.read_new():
            self._take(raw)
        return self._startup.facts

    def _open_late(self, tail: LogTail) -> None:
        """A log that is long when first opened (a console opened on a server that has served
        for hours): reading it from its start would take a megabyte a tick, the log panel
        showing hours-old lines meanwhile. Its present is read instead: the last lines that
        show, and the start of the server's run for its startup facts (shown too when little
        else shows, as for an idle server). The lines between are in the file (`vramtop
        logs`)."""
        end = tail.skip_to_end(LATE_LOG_BYTES)
        if not end:
            return
        start = self._log_start()
        if start > end:
            start = 0  # the record's offset is another file's (replaced since): this one whole
        last, reached = last_lines(tail.path, end, LOG_KEPT, _shown, LATE_BACK_BYTES, start)
        begun = self._read_run_start(tail.path, start, end, reached)
        recent = [raw for raw in last if _shown(raw)]
        if _rows(recent, LATE_ROWS) < LATE_ROWS:
            # Little shows: an idle server's polling, or a busy one's request lines, which
            # fold into a row or two. The run's start goes above them, and both fit in what
            # is kept (LOG_KEPT lines, a console's first read), so that the panel shows both.
            recent = recent[-max(LOG_KEPT - len(begun), LOG_KEPT // 2) :]
            self._lines.extend(begun[max(0, len(begun) - (LOG_KEPT - len(recent))) :])
        for raw in recent:
            self._take(raw)

    def _read_run_start(self, path: Path, start: int, end: int, reached: int) -> list[str]:
        """The start of the server's run, from `start`, read once (at most
        LATE_STARTUP_BYTES): its facts, to the end of the startup, and the lines of it that
        show, to the one that says where the server listens (what follows is its routes, then
        requests) and before `reached`, where the last lines shown begin."""
        raws, before = read_section(path, start, end, LATE_STARTUP_BYTES, reached)
        # The facts known already (the same run's log, opened again): they stay, and the
        # lines' own parser says where the start ends.
        ends = StartupParser() if self._startup.complete else None
        begun: list[str] = []
        for index, raw in enumerate(raws):
            if ends is None:
                if self._startup.complete:
                    break
                line = self._take(raw, shown=False)
            elif ends.complete or index >= before:
                break
            else:
                line = None if is_poll_access_line(raw) else mask_line(raw)
                if line is not None:
                    ends.feed(line)
            if line is not None and index < before:
                begun.append(line)
        return begun

    def _take(self, raw: str, shown: bool = True) -> str | None:
        """One line of the server's output: kept to show, and read for facts. The line as
        shown (masked), or None for one that never shows."""
        if is_poll_access_line(raw):
            # Our own scrapes, once a second (the log file keeps them): dropped unread, and
            # the short page's line is long (see sources/metrics_page.py).
            return None
        line = mask_line(raw)  # shown and recorded: never a key the server printed
        if shown:
            self._lines.append(line)
        if line.startswith(START_MARKER):
            # The supervisor marks each launch in the log: facts before it belong to an
            # earlier server (an old startup failure must not stick to the new one).
            self._startup = StartupParser()
            self._stats = None
        skipped = self._startup.skipped_lines
        self._startup.feed(line)
        if self._startup.skipped_lines > skipped:
            log.warning(
                "server log: a line could not be read, skipped (%s)", self._startup.last_skipped
            )
        stats = parse_stats_line(line)
        if stats is not None:
            self._stats = stats
        return line

    def _split(self, sample: Sample, outside: int) -> Split | None:
        if not sample.gpu.devices:
            return None
        info = sample.info
        running = _server_running(info, sample.server)
        pids = info.pids if info and info.pids else ((info.pid,) if info and info.pid else ())
        if running and sample.windows is not None:
            by_windows = split_from_windows(
                sample.gpu.devices[0],
                sample.windows,
                util=server_util(sample),
                outside_budget_bytes=outside,
            )
            if by_windows is not None:
                return by_windows
        return split_card(
            sample.gpu.devices[0],
            server_pids=pids,
            server_running=running,
            util=server_util(sample),
            outside_budget_bytes=outside,
        )


def _rows(lines: list[str], enough: int) -> int:
    """How many rows `lines` make in the log panel, once repeats are folded (counted up to
    `enough`)."""
    rows = FoldedRows()
    for line in lines:
        rows.add(line)
        if len(rows.rows) >= enough:
            break
    return len(rows.rows)


def _shown(line: str) -> bool:
    """Whether a line of the server's output shows (a client's polling does not)."""
    return not is_poll_access_line(line)


def _server_running(info: ServerInfo | None, server: ServerReading | None) -> bool:
    if info is not None:
        return info.state in (ServerState.STARTING, ServerState.RUNNING, ServerState.STOPPING)
    return bool(server and server.reachable)
