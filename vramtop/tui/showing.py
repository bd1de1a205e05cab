"""What the console shows, and how it reads: the reader thread, one frame at a time, and the
rendering of the frame into the panels, the banner and the header.

The reader, a thread worker that lives as long as the console, does the blocking reads
through the Backend and posts a `SampleArrived`; the handler only renders.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import App
from textual.timer import Timer
from textual.worker import get_current_worker

from vramtop import locations
from vramtop.core.model import GpuReading, Rates, Sample, ServerState
from vramtop.machines.deferred_backend import BackendUnavailable
from vramtop.machines.interface import LOG_KEPT, LOG_TAIL, Backend, Frame
from vramtop.settings import Settings
from vramtop.tui.keys import DEFAULT_KEYS, KEY_DISPLAY
from vramtop.tui.messages import SampleArrived, TickFailed
from vramtop.tui.widgets.console_header import ConsoleHeader
from vramtop.tui.widgets.finding_banner import DEFAULT_KEYS as BANNER_KEYS
from vramtop.tui.widgets.finding_banner import FindingBanner
from vramtop.tui.widgets.kv_pool_panel import KvPoolPanel
from vramtop.tui.widgets.server_log import ServerLog
from vramtop.tui.widgets.throughput_panel import ThroughputPanel, normal_origin
from vramtop.tui.widgets.vram_split_panel import VramSplitPanel

if TYPE_CHECKING:
    # The first frame is drawn before any reading, and waits for none of the diagnosis'
    # modules: they come with the backend, and are used once a reading is shown.
    from vramtop.core.events import Event
    from vramtop.core.findings import Finding
    from vramtop.core.headroom.terms import HeadroomInputs

log = logging.getLogger(__name__)

HISTORY = 240  # samples kept for the sparklines: four minutes at 1 Hz
# A result ("simulated call started", "ready in 0.6 s") is news for this long, then it goes:
# left up for minutes it reads as if it were still happening.
RESULT_SHOWN_S = 15.0
# Below this, the finding banner's details put the evidence ladder on one line.
SHORT_HEIGHT = 36
# The reader looks this often whether it was cancelled, should the console end without
# waking it (it is woken on unmount).
READER_CHECK_S = 1.0


class ShowingConsole(App[int]):
    """The console's state, its reader and its rendering (`VramtopApp` adds the layout and
    the keys; `ActingConsole` the actions)."""

    # Found once, on mount: the panels are drawn every tick.
    _header: ConsoleHeader
    _banner: FindingBanner
    _vram: VramSplitPanel
    _kv: KvPoolPanel
    _throughput: ThroughputPanel
    _server_log: ServerLog

    def __init__(
        self,
        backend: Backend,
        settings: Settings | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.backend = backend
        self.settings = settings or Settings()
        self._clock = clock
        self.frame = Frame(Sample(t=0.0, gpu=GpuReading(source="none", error="no sample yet")))
        self.sample: Sample | None = None
        self.findings: list[Finding] = []
        self.events: list[Event] = []
        self._recording_failed_said = False
        self.headroom_inputs: HeadroomInputs | None = None
        self.baseline: Rates | None = None
        self._read_failure: str | None = None  # the reader thread's last failure, if any
        self.normal_origin: str | None = None
        self.busy: str | None = None  # the action running now, if any
        self._load_stop_asked = False  # s during a start: the load is being stopped
        self.activity: str | None = None  # one line: progress or the last action's result
        self._activity_until: float | None = None  # when a result stops being news
        self.desktop_peak_bytes: int | None = None
        self._generation: deque[float] = deque(maxlen=HISTORY)
        self._prompt: deque[float] = deque(maxlen=HISTORY)
        self._kv_usage: deque[float] = deque(maxlen=HISTORY)
        # Reads asked for by the timer (and after actions) and answered by the reader: counted
        # so that an ask made while a read runs gets a read of its own, after it.
        self._reads_asked = 0
        self._reads_answered = 0
        self._read_wanted = threading.Event()
        self._closing = False
        # Reads of every log line the backend keeps, asked for (the first read, to fill the
        # log panel, and the panel's when a log that does not continue it rebuilds its rows)
        # and made; the asks are written on the event loop, the reads counted by the reader.
        self._kept_asked = 1
        self._kept_read = 0
        self._restart_armed = False
        self._theme_names: list[str] = []
        self._ticker: Timer | None = None  # the timer that asks for reads
        self._keys: dict[str, str] = {}  # binding id -> key(s), as remapped in the settings
        self._pending_flags: dict[str, Any] = {}
        self._quitting = False
        self._ended = False  # a replay reached the end of its file
        self._banner_details = False  # the finding banner's ladder, shown on demand (d)
        # Failure notices told while a dialog is open, shown once it closes (VramtopApp.notify).
        self._held_notices: list[Callable[[], None]] = []
        # Printed once the console has gone: where the server left running is, how to stop it.
        self.farewell: str | None = None

    # -- reading ---------------------------------------------------------------------------
    def request_tick(self) -> None:
        """Ask the reader for a read. Asks made while a read runs become one read after it:
        a hanging source never piles reads up."""
        self._reads_asked += 1
        self._read_wanted.set()

    @property
    def reads_pending(self) -> bool:
        """A read was asked for and its sample has not been shown yet."""
        return self._reads_answered < self._reads_asked

    def on_unmount(self) -> None:
        self._closing = True
        self._read_wanted.set()  # wake the reader so that it ends now

    @work(thread=True, exclusive=True, exit_on_error=False, group="tick")
    def _reader(self) -> None:
        """Reads when asked, for the console's whole life.

        One thread worker, woken by the timer through an Event. A worker started for each
        tick (a Worker, a task and an executor future, and three state messages handled on
        the event loop) cost the event loop about 0.6 ms a second: a tenth of the demo's
        CPU (bench/bench_console.py)."""
        worker = get_current_worker()
        wanted = self._read_wanted
        while not (self._closing or worker.is_cancelled):
            if not wanted.wait(READER_CHECK_S):
                continue
            wanted.clear()
            if self._closing:
                return
            # Every ask made up to here is answered by this read; a later one sets `wanted`
            # again and gets the next.
            self._read(self._reads_asked)

    def _read(self, answers: int) -> None:
        kept_asked = self._kept_asked
        # Every line the backend keeps when asked, else the tail that continues the panel.
        limit = LOG_KEPT if kept_asked != self._kept_read else LOG_TAIL
        try:
            frame = self.backend.tick(limit)
            # Where the normal rate came from ('remembered 2 h ago', 'learned now', or that
            # none is known yet).
            origin = normal_origin(frame.normal_rate, self._clock())
        except Exception as error:  # a backend bug must not take the console down
            reason = str(error) if isinstance(error, BackendUnavailable) else None
            reason = reason or f"{type(error).__name__}: {error}"
            # Once per reason, not once a second; none while quitting: the backend is being
            # closed, and its reads fail by design.
            if reason != self._read_failure and not self._quitting:
                log.exception("tick failed")
            self._read_failure = reason
            self.post_message(TickFailed(reason, answers=answers))
            return
        self._read_failure = None
        self._kept_read = kept_asked
        # Everything goes back in the message: the app's state is written on the event loop
        # only, never from this thread while a dialog may be reading it.
        kept = limit == LOG_KEPT or len(frame.log_lines) < limit  # fewer came: all there is
        self.post_message(
            SampleArrived(frame, normal_origin=origin, answers=answers, log_kept=kept)
        )

    def on_tick_failed(self, message: TickFailed) -> None:
        self._reads_answered = max(self._reads_answered, message.answers)
        if self._quitting:
            return  # the status line says what the quit is doing until it is done
        self._say(f"reading failed ({message.reason}); details in {locations.own_log_file().name}")
        self._render_header()
        self.refresh_bindings()  # a backend that could not be built offers no action

    def on_sample_arrived(self, message: SampleArrived) -> None:
        self._reads_answered = max(self._reads_answered, message.answers)
        frame = message.frame
        sample = frame.sample
        previous = self.sample
        previous_state = previous.info.state if previous and previous.info else None
        self.frame = frame
        self.sample = sample
        self.findings = list(frame.findings)
        self.events = list(frame.events)
        failed = [e for e in frame.events if e.name == "recording_failed"]
        if failed and not self._recording_failed_said:
            # The recording ended (a full disk); the live view goes on, and says so.
            self._recording_failed_said = True
            error = failed[-1].detail.get("error")
            self._say(f"recording failed: {error} · the live view goes on", news=False)
        self.headroom_inputs = frame.headroom_inputs
        self.baseline = frame.baseline
        self.normal_origin = message.normal_origin
        if previous is None or sample.t != previous.t:
            self._remember(sample)  # the same frame again (a replay's last) is no new history
        if self.backend.finished and not self._ended:
            self._end_of_recording(sample)
        self._render(sample, list(frame.log_lines), log_kept=message.log_kept)
        state = sample.info.state if sample.info else None
        if state != previous_state:
            self.refresh_bindings()

    def _end_of_recording(self, sample: Sample) -> None:
        """A replay reached the end of its file: the clock stops and the last frame stays."""
        self._ended = True
        if self._ticker is not None:
            self._ticker.stop()
        # (The header's first line says when it ended.)
        self._say(f"the clock stopped · {self.key_of('quit')} quits", news=False)

    def _remember(self, sample: Sample) -> None:
        rates = sample.rates
        self._generation.append(rates.generation_tps or 0.0)
        self._prompt.append(rates.prompt_tps or 0.0)
        metrics = sample.server.metrics if sample.server else None
        usage = metrics.kv_cache_usage if metrics else None
        self._kv_usage.append(usage or 0.0)
        desktop = sample.split.desktop_bytes if sample.split else None
        if desktop is not None:
            self.desktop_peak_bytes = max(desktop, self.desktop_peak_bytes or 0)

    # -- showing ---------------------------------------------------------------------------
    def _render(self, sample: Sample, log_lines: list[str], *, log_kept: bool = False) -> None:
        """Every panel from `sample`; `log_kept`: `log_lines` are all the backend keeps."""
        from vramtop.core import sample_facts

        self._render_header()
        self._render_banner()
        self._vram.show(
            sample.gpu, sample.split, sample.info, sample.windows, util=sample_facts.util(sample)
        )
        self._kv.show(sample, tuple(self._kv_usage))
        self._throughput.show(
            sample,
            self.baseline,
            tuple(self._generation),
            tuple(self._prompt),
            origin=self.normal_origin,
            normal_rate=self.frame.normal_rate,
        )
        notice = _log_notice(sample, self.key_of("start_stop"))
        # A replay's last frame stays on screen: a count held back is drawn now.
        now = None if self._ended else sample.t
        self._server_log.show(log_lines, notice or self.frame.log_notice, now=now, kept=log_kept)

    def on_server_log_kept_lines_wanted(self) -> None:
        self._kept_asked += 1  # the next read brings them (not one now: reads keep their pace)

    def _render_banner(self) -> None:
        had = self._banner.has_class("-open")
        self._banner.show(
            self.findings,
            details=self._banner_details,
            short=self.size.height < SHORT_HEIGHT,
            can_act=self.backend.can_act,
            keys={name: self.key_of(name) for name in BANNER_KEYS},
        )
        if had != bool(self.findings):
            self.refresh_bindings()  # d (details) is offered while a finding is open

    def _say(self, text: str | None, *, news: bool = True) -> None:
        """Set the status line; `news` (a result) fades after RESULT_SHOWN_S, progress stays."""
        self.activity = text
        self._activity_until = self._clock() + RESULT_SHOWN_S if news and text else None

    def _render_header(self) -> None:
        until = self._activity_until
        if until is not None and self.busy is None and self._clock() >= until:
            self._say(None)
        self._header.show(
            self.sample,
            self._clock(),
            wsl=self.backend.wsl,
            call_on=self.frame.call_on,
            demo=self.backend.demo,
            profile=self.backend.profile_name,
            activity=self.activity,
        )

    @property
    def state(self) -> ServerState | None:
        return self.sample.info.state if self.sample and self.sample.info else None

    def key_of(self, binding_id: str) -> str:
        """The key an action is on, as shown: the settings' keymap, else the default (the
        first of several)."""
        keys = self._keys.get(binding_id) or DEFAULT_KEYS[binding_id]
        first = keys.split(",")[0].strip()
        return KEY_DISPLAY.get(first, first)


def _log_notice(sample: Sample, start_key: str) -> str | None:
    info = sample.info
    if info and info.state is ServerState.CRASHED:
        return f"vLLM exited: the last lines say why · {start_key} starts it again"
    return None
